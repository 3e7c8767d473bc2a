package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/peerfile"
)

// servePeerFile redeems a peer-file handle (GET /peer-files/{handle}). Only members' peer credentials are
// served: any member of the formation may redeem a handle this member minted, because the handle is the
// capability; the roster's reach rules, which govern tasks, are not consulted. The checks run in this
// order and nothing is opened before the handle passes: token, form, formation, member, signature,
// expiry; then the file is opened below the export root through no symbolic link (peerfile.Root) and
// compared with the handle's identity before a byte is sent, or, on a member's replicas, the copy
// share-file kept in their shared store is sent (sendPeerFile).
func (d *Door) servePeerFile(w http.ResponseWriter, r *http.Request) {
	r, span := d.startPeerFileSpan(r)
	sw := &statusWriter{ResponseWriter: w}
	defer endPeerFileSpan(span, sw)
	w = sw
	caller, _ := d.auth.authenticate(r)
	switch caller.Principal {
	case Nobody:
		d.refusePeerFile(w, peerfile.ErrUnauthenticated, "peer files are served to the members of this formation: present a member's peer credential as Authorization: Bearer")
		return
	case Operator:
		d.refusePeerFile(w, peerfile.ErrForbidden, "peer files are served to the members of this formation only, with their peer credentials; the operator token does not redeem handles")
		return
	}
	if !d.isMember(caller.Member) {
		d.refusePeerFile(w, peerfile.ErrForbidden, "the credential names "+caller.Member+", who is not a member of this formation")
		return
	}
	h, err := peerfile.Decode(chi.URLParam(r, "handle"))
	if err != nil {
		d.refusePeerFile(w, err, err.Error())
		return
	}
	if span.IsRecording() {
		span.SetAttributes(conv.PeerFileID.String(h.ID()))
	}
	formation := ""
	if d.cfg.Roster != nil {
		formation = d.cfg.Roster.Formation
	}
	switch {
	case h.Formation != formation:
		d.refusePeerFile(w, peerfile.ErrWrongFormation, fmt.Sprintf("the handle was minted in formation %q; this door belongs to formation %q", h.Formation, formation))
	case h.Member != d.cfg.Member:
		d.refusePeerFile(w, peerfile.ErrWrongMember, fmt.Sprintf("the handle was minted by %s; this is %s's door", h.Member, d.cfg.Member))
	case h.Verify(d.cfg.Tokens.Formation) != nil:
		d.refusePeerFile(w, peerfile.ErrForged, "the handle's signature does not match")
	case h.Expired(d.cfg.Now()):
		d.refusePeerFile(w, peerfile.ErrExpired, "the handle expired at "+h.ExpiresAt().Format(time.RFC3339))
	case d.cfg.ExportRoot.IsZero():
		d.refusePeerFile(w, peerfile.ErrNotExported, d.cfg.Member+" exports no files")
	default:
		d.sendPeerFile(w, r, h)
	}
}

// refusePeerFile answers a peer-file request with err's status and {"reason", "message": detail}.
func (d *Door) refusePeerFile(w http.ResponseWriter, err error, detail string) {
	d.cfg.Logger.Debug("peer file refused", "reason", peerfile.Reason(err), "detail", detail)
	writeRefusalHeader(w, "application/json", peerfile.Status(err))                                     // 401 for ErrUnauthenticated alone
	_ = json.NewEncoder(w).Encode(map[string]string{"reason": peerfile.Reason(err), "message": detail}) // a client gone: no one is left to tell
}

// sendPeerFile sends the file h names. A member run as replicas sends the copy share-file kept in their
// shared store, whichever replica minted the handle, so every replica's door sends the same bytes;
// failing that (a handle minted before the member ran as replicas), and in a member of one process, it
// sends the file under the export root, only if it is still the file h names.
func (d *Door) sendPeerFile(w http.ResponseWriter, r *http.Request, h *peerfile.Handle) {
	if d.cfg.Files != nil {
		sf, err := d.cfg.Files.PeerFile(r.Context(), h.Digest, h.Size)
		switch {
		case err == nil:
			d.sendStoredPeerFile(w, r, h, sf)
			return
		case !errors.Is(err, store.ErrFileNotKept):
			d.cfg.Logger.Error("peer file: reading the copy in the task store", "path", h.Path, "err", err)
			d.refusePeerFile(w, peerfile.ErrUnreadable, "the file cannot be read now; try again in a moment")
			return
		}
	}
	f, err := peerfile.Open(d.cfg.ExportRoot, h.File)
	if err != nil {
		var pe *peerfile.Error
		if !errors.As(err, &pe) {
			d.cfg.Logger.Error("peer file: the export root cannot be opened", "err", err)
			d.refusePeerFile(w, err, "the file cannot be read")
			return
		}
		d.refusePeerFile(w, err, pe.Detail)
		return
	}
	defer func() { _ = f.Close() }() // only read
	d.streamPeerFile(w, r, h, f)
}

// sendStoredPeerFile sends the copy of h's file kept in the shared store, after comparing its size and
// SHA-256 with the handle's (the store looked it up by them, and checked its bytes against them when
// it kept them).
func (d *Door) sendStoredPeerFile(w http.ResponseWriter, r *http.Request, h *peerfile.Handle, sf store.SharedFile) {
	if sf.Size != h.Size || sf.SHA256 != h.Digest {
		d.refusePeerFile(w, peerfile.ErrChanged, h.Path+" changed since the handle was minted: the kept copy is not the file it names")
		return
	}
	d.streamPeerFile(w, r, h, sf.Body)
}

// streamPeerFile sends h.Size bytes of body, which is h's file checked, with the handle's digest.
func (d *Door) streamPeerFile(w http.ResponseWriter, r *http.Request, h *peerfile.Handle, body io.Reader) {
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Length", strconv.FormatInt(h.Size, 10))
	hd.Set(peerfile.DigestHeader, peerfile.FormatDigest(h.Digest))
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if n, err := io.CopyN(w, body, h.Size); err != nil && r.Context().Err() == nil {
		// The file shrank under the door after it was checked (or its kept copy was removed while it was
		// sent): cut the response short, so the fetcher sees a broken transfer rather than a short file.
		d.cfg.Logger.Warn("peer file cut short while sent", "path", h.Path, "sent", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	d.cfg.Logger.Debug("peer file sent", "path", h.Path, "bytes", h.Size, "handle_id", h.ID())
}

// peerFileRoute is the route a handle is redeemed at: the http.route of its span, which never carries
// the handle (a capability).
const peerFileRoute = "/peer-files/{handle}"

// startPeerFileSpan starts the SERVER span of one peer-file request (DESIGN §17), named by the HTTP
// server conventions, continuing the fetcher's trace when the request carries a valid traceparent, and
// returns the request with it in its context.
func (d *Door) startPeerFileSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := r.Context()
	if _, ok := r.Header["Traceparent"]; ok || len(r.Header["Baggage"]) > 0 {
		ctx = d.tracing.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	ctx, span := d.tracing.tracer.Start(ctx, http.MethodGet+" "+peerFileRoute, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(conv.HTTPRequestMethod.String(http.MethodGet), conv.HTTPRoute.String(peerFileRoute),
			conv.Member.String(d.cfg.Member)))
	return r.WithContext(ctx), span
}

// endPeerFileSpan ends a peer-file request's span with the status the door answered: a 5xx is an
// error of the span (a 4xx is the fetcher's, as the conventions say of a server).
func endPeerFileSpan(span trace.Span, sw *statusWriter) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(conv.HTTPResponseStatus.Int(status))
	if status >= 500 {
		span.SetAttributes(conv.ErrorType.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// statusWriter notes the status code a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is the writer below, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
