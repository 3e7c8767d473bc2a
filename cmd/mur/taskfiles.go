package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/a2a"
)

// responseArtifact is the artifact that holds a task's answer as text.
const responseArtifact = "response"

// artifactName is how an artifact is named to the user: its name, else its id.
func artifactName(a a2a.Artifact) string {
	if a.Name != "" {
		return a.Name
	}
	return a.ArtifactID
}

// isFile reports whether a part carries a file: its bytes inline, or a URL to fetch them from.
func isFile(p a2a.Part) bool { return p.Raw != nil || p.URL != "" }

// describeParts says in one line what parts hold: text, a file (its type, size or URL), data.
func describeParts(parts []a2a.Part) string {
	var out []string
	for _, p := range parts {
		switch {
		case p.Text != nil:
			out = append(out, *p.Text)
		case p.Raw != nil:
			out = append(out, fmt.Sprintf("file, %s, %s inline", orUnknown(p.MediaType), size(int64(len(p.Raw)))))
		case p.URL != "":
			out = append(out, fmt.Sprintf("file, %s, at %s", orUnknown(p.MediaType), p.URL))
		case p.Data != nil:
			out = append(out, "data "+cutLine(string(p.Data), 80))
		}
	}
	return strings.Join(out, "; ")
}

func orUnknown(mediaType string) string {
	if mediaType == "" {
		return "type unknown"
	}
	return mediaType
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// extras says what a task's answer carries besides its text: the names of its file artifacts, and
// whether it has data parts.
func extras(t *a2a.Task) (files []string, data bool) {
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			switch {
			case isFile(p):
				files = append(files, artifactName(a))
			case p.Data != nil:
				data = true
			}
		}
	}
	return files, data
}

// noteExtras tells the user that an answer also carries files or data, and how to see and save them.
func (c *conn) noteExtras(w io.Writer, d door, t *a2a.Task, saved bool) {
	files, data := extras(t)
	if len(files) == 0 && !data {
		return
	}
	var what []string
	if len(files) > 0 {
		what = append(what, fmt.Sprintf("%d file(s): %s", len(files), strings.Join(files, ", ")))
	}
	if data {
		what = append(what, "data")
	}
	fmt.Fprintf(w, "(the answer also carries %s; see it all: mur get%s %s", strings.Join(what, " and "), c.flagsFor(d.member), t.ID)
	if len(files) > 0 && !saved {
		fmt.Fprintf(w, "; save the files: mur get%s --save %s %s", c.flagsFor(d.member), t.ID, t.ID)
	}
	fmt.Fprintln(w, ")")
}

// saveFiles writes the file artifacts of task t into dir, each at its artifact's name (the path the
// task wrote it at below out/artifacts/): the bytes it carries inline, or those its URL serves, read
// from the door d with the operator token. It replaces no file: one already there with other bytes is
// an error, and the files after it are still saved.
func (c *conn) saveFiles(ctx context.Context, d door, t *a2a.Task, dir string, w io.Writer) error {
	var errs []error
	n := 0
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if !isFile(p) {
				continue
			}
			n++
			name := filepath.FromSlash(artifactName(a))
			if !filepath.IsLocal(name) {
				name = filepath.Base(filepath.FromSlash(p.Filename))
			}
			if !filepath.IsLocal(name) {
				errs = append(errs, fmt.Errorf("artifact %q of task %s names no file inside %s; it was not saved", artifactName(a), t.ID, dir))
				continue
			}
			dst := filepath.Join(dir, name)
			body, err := c.fileBytes(ctx, d, t.ID, p)
			if err != nil {
				errs = append(errs, fmt.Errorf("artifact %s of task %s: %w", artifactName(a), t.ID, err))
				continue
			}
			switch err := writeFileOnce(dst, body); {
			case errors.Is(err, errSame):
				fmt.Fprintf(w, "%s is already there, with the same %s\n", dst, size(int64(len(body))))
			case errors.Is(err, fs.ErrExist):
				errs = append(errs, fmt.Errorf("%s already exists with other bytes, and mur replaces no file: save into another folder (--save DIR) or move it away", dst))
			case err != nil:
				errs = append(errs, err)
			default:
				fmt.Fprintf(w, "saved %s (%s)\n", dst, size(int64(len(body))))
			}
		}
	}
	if n == 0 {
		fmt.Fprintf(w, "task %s has no file artifacts; nothing was saved\n", t.ID)
	}
	return errors.Join(errs...)
}

// maxFetchBytes bounds a file read from an artifact's URL.
const maxFetchBytes = 1 << 30

// fileBytes returns a file part's bytes: those it carries, or those its URL serves. The URL is read
// from d, the door the task is at, whatever host the URL names: the operator token goes to that door
// only, and a door behind another name (a container's service name) is still reached.
func (c *conn) fileBytes(ctx context.Context, d door, id a2a.TaskID, p a2a.Part) ([]byte, error) {
	if p.Raw != nil {
		return p.Raw, nil
	}
	u, err := url.Parse(p.URL)
	if err != nil || path.Clean(u.Path) != u.Path || !strings.HasPrefix(u.Path, "/tasks/"+string(id)+"/artifacts/") {
		return nil, fmt.Errorf("its URL %q is not one of the door's artifact URLs (/tasks/%s/artifacts/…), so the operator token is not sent there", p.URL, id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+u.EscapedPath(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, c.explain(d, fmt.Errorf("reading %s: %w", req.URL, err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return nil, fmt.Errorf("%s answered %s: %s", req.URL, res.Status, strings.TrimSpace(string(msg)))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxFetchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", req.URL, err)
	}
	if len(body) > maxFetchBytes {
		return nil, fmt.Errorf("%s serves more than %s; fetch it with curl", req.URL, size(maxFetchBytes))
	}
	return body, nil
}

// errSame says the file to write is already there with the same bytes.
var errSame = errors.New("the same file is already there")

// writeFileOnce writes body at dst (and the folders above it) unless a file is there: errSame when it
// holds the same bytes, an error matching fs.ErrExist otherwise.
func writeFileOnce(dst string, body []byte) error {
	if old, err := os.ReadFile(dst); err == nil {
		if bytes.Equal(old, body) {
			return errSame
		}
		return fs.ErrExist
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(body); err != nil {
		// Cleanup on a failed write: its error is the one to report.
		_ = f.Close()
		_ = os.Remove(dst)
		return err
	}
	return f.Close()
}
