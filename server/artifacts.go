package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// serveArtifact serves a task's artifact too large to carry inline (GET /tasks/{id}/artifacts/{name},
// DESIGN §15) to the task's sender only: the operator for its own tasks, a peer for the tasks it sent.
// Any other request is answered as a task that does not exist. On a member's replicas the file is read
// from their shared store when this process did not run the task (DESIGN §16).
func (d *Door) serveArtifact(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, msg string) {
		writeRefusalHeader(w, "text/plain; charset=utf-8", status)
		fmt.Fprintln(w, msg)
	}
	caller, why := d.auth.authenticate(r)
	scope := store.OperatorScope()
	switch {
	case caller.Principal == Nobody:
		refuse(http.StatusUnauthorized, why)
		return
	case caller.Principal == Peer:
		scope = store.PeerScope(caller.Member)
	}
	id, name := a2a.TaskID(chi.URLParam(r, "id")), chi.URLParam(r, "*")
	path, mediaType, err := d.cfg.Executor.ArtifactFile(r.Context(), id, name, scope)
	if errors.Is(err, a2a.ErrTaskNotFound) {
		refuse(http.StatusNotFound, fmt.Sprintf("task %s has no artifact %q served here, or it is not yours: an artifact's URL is readable by the task's sender only", a2a.CutID(string(id)), a2a.CutID(name)))
		return
	}
	if err != nil {
		refuse(http.StatusInternalServerError, "reading the task failed")
		return
	}
	f, err := os.Open(path)
	if err != nil {
		// Not in this process's workdir: on a member's replicas, the copy in their shared store, whichever
		// replica ran the task.
		if d.cfg.Files != nil {
			sf, err := d.cfg.Files.ArtifactFile(r.Context(), id, name)
			switch {
			case err == nil:
				serveArtifactBody(w, r, mediaType, sf.Kept, sf.Body)
				return
			case !errors.Is(err, store.ErrFileNotKept):
				d.cfg.Logger.Error("artifact: reading its file in the task store", "task", id, "err", err)
				refuse(http.StatusServiceUnavailable, "reading the artifact failed; try again in a moment")
				return
			}
		}
		refuse(http.StatusGone, fmt.Sprintf("the file of artifact %q of task %s is no longer kept", a2a.CutID(name), id))
		return
	}
	defer func() { _ = f.Close() }() // only read
	info, err := f.Stat()
	if err != nil {
		refuse(http.StatusInternalServerError, "reading the artifact failed")
		return
	}
	serveArtifactBody(w, r, mediaType, info.ModTime(), f)
}

// serveArtifactBody serves an artifact's file, body, as private and of its own media type, with ranges.
func serveArtifactBody(w http.ResponseWriter, r *http.Request, mediaType string, modTime time.Time, body io.ReadSeeker) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", modTime, body)
}

// writeRefusalHeader starts the answer of a file the door refuses to serve (a task's artifact, a peer
// file): its content type, no caching, the bearer challenge for a 401, and the status.
func writeRefusalHeader(w http.ResponseWriter, contentType string, status int) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="murmur"`)
	}
	w.WriteHeader(status)
}
