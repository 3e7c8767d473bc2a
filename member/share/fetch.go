package share

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/nofollow"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/runtimetools"
)

// FetchLimitMB is the largest file fetch-peer-file stores, in MiB (runtimetools.PeerFileFetcher).
func (pf *Files) FetchLimitMB() int {
	if mb := pf.cfg.Capsule.Capabilities.PeerFetchMaxMB; mb > 0 {
		return mb
	}
	return defaultFetchMB
}

// FetchPeerFile redeems a handle at the door of the member that minted it and stores the file in the
// workdir (runtimetools.PeerFileFetcher). Everything that can be checked here is checked before a request
// is sent; the door checks the handle again and compares the file with it; the bytes are checked against
// the handle's SHA-256 while they are written to a temporary file beside the target, which is renamed (or,
// without overwrite, linked) into place only once they match. Nothing is written outside the workdir.
func (pf *Files) FetchPeerFile(ctx context.Context, req runtimetools.FetchRequest) (runtimetools.FetchedFile, error) {
	var ft fetchTrace
	f, err := pf.fetch(ctx, req, &ft)
	ft.end(err)
	return f, err
}

// fetch is FetchPeerFile, traced from its request to the door on (ft).
func (pf *Files) fetch(ctx context.Context, req runtimetools.FetchRequest, ft *fetchTrace) (runtimetools.FetchedFile, error) {
	f := &fetching{pf: pf}
	h, peer, err := f.handle(req.Handle)
	if err != nil {
		return runtimetools.FetchedFile{}, err
	}
	target, err := f.target(req.As, h)
	if err != nil {
		return runtimetools.FetchedFile{}, err
	}
	if !roster.EgressAllowed(peer.URL, pf.cfg.Capsule.Capabilities.Network.Allow) {
		return runtimetools.FetchedFile{}, f.refuse("egress", "%s's door is outside this capsule's capabilities.network.allow, so nothing was fetched; the operator must add localhost (or %s's host) to it.",
			h.Member, h.Member)
	}
	wd, err := nofollow.Open(pf.cfg.Workdir)
	if err != nil {
		pf.cfg.Log.Error("fetch-peer-file: the workdir cannot be opened", "err", err)
		return runtimetools.FetchedFile{}, f.refuse("internal", "the workdir cannot be opened, so nothing was stored.")
	}
	defer wd.Close()
	if err := f.checkTarget(wd, target, h, req.Overwrite); err != nil {
		return runtimetools.FetchedFile{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, peerFileTimeout)
	defer cancel()
	f.sent = true
	ctx = ft.start(ctx, pf.cfg.Member, peer.URL, h)
	resp, err := pf.redeem(ctx, peer.URL, h.String())
	if resp != nil {
		ft.status = resp.StatusCode
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return runtimetools.FetchedFile{}, f.refuse("canceled", "the task was canceled while %s was being fetched; nothing was stored.", h.Path)
		}
		return runtimetools.FetchedFile{}, f.refuse("unreachable", "%s's door could not be reached, so nothing was stored. Try again in a moment.", h.Member)
	}
	defer resp.Body.Close()
	if err := f.store(ctx, wd, target, resp, h, req.Overwrite); err != nil {
		return runtimetools.FetchedFile{}, err
	}
	return f.out, nil
}

// fetching is one fetch-peer-file call on its way: the answer, filled in as the handle is read, and
// whether the door was asked.
type fetching struct {
	pf   *Files
	out  runtimetools.FetchedFile
	sent bool // the door was asked: a failure from then on is the tool's, not a refusal of the call
}

// refuse is the call's refusal, a *runtimetools.Refusal naming the file once the handle has named it.
func (f *fetching) refuse(reason, format string, args ...any) error {
	r := &runtimetools.Refusal{Reason: reason, Text: "'fetch-peer-file' refused: " + fmt.Sprintf(format, args...), Ran: f.sent}
	if f.out.From != "" {
		r.Fields = map[string]any{"from": f.out.From, "path": f.out.Name, "handle_id": f.out.ID}
	}
	f.pf.cfg.Log.Debug("fetch-peer-file refused", "reason", reason, "from", f.out.From)
	return r
}

// handle reads the handle the model sent and checks it before anything is asked of its door: this
// member is in a formation, the handle's, of a member of its roster; its signature holds, it has not
// expired, and its file is within capabilities.peer_fetch.max_mb. It returns the handle and its member.
func (f *fetching) handle(raw string) (*peerfile.Handle, roster.Member, error) {
	pf := f.pf
	if !pf.inFormation() {
		return nil, roster.Member{}, f.refuse("not_in_formation", "handles are redeemed only by a member of a formation, and this session is in none.")
	}
	h, err := peerfile.Decode(raw)
	if err != nil {
		return nil, roster.Member{}, f.refuse("malformed", "%s is not a peer-file handle: %s. Copy the handle exactly as the member sent it: it starts with %s and has no spaces or line breaks.",
			clip(raw), strings.TrimPrefix(err.Error(), peerfile.ErrMalformed.Error()+": "), peerfile.Prefix)
	}
	formation := pf.cfg.Roster.Formation
	if h.Formation != formation {
		return nil, roster.Member{}, f.refuse(peerfile.Reason(peerfile.ErrWrongFormation), "the handle was minted in formation %q, and this member is in formation %q: a handle works only inside the formation that minted it. Ask a member of this formation to share the file.",
			h.Formation, formation)
	}
	peer, ok := pf.cfg.Roster.Member(h.Member)
	if !ok {
		return nil, roster.Member{}, f.refuse(peerfile.Reason(peerfile.ErrUnknownMember), "the handle names member %q, which is not in this formation's roster. Copy the handle exactly as the member sent it.", h.Member)
	}
	f.out.From, f.out.Name, f.out.ID, f.out.Size = h.Member, h.Path, h.ID(), h.Size
	f.out.SHA256 = hex.EncodeToString(h.Digest[:])
	if h.Verify(pf.cfg.FormationToken) != nil {
		return nil, roster.Member{}, f.refuse(peerfile.Reason(peerfile.ErrForged), "the handle's signature does not match, so it was altered or mistyped on its way. Copy it exactly as %s sent it, or ask %s to share the file again.",
			h.Member, h.Member)
	}
	if h.Expired(pf.cfg.Now()) {
		return nil, roster.Member{}, f.refuse(peerfile.Reason(peerfile.ErrExpired), "the handle for %s expired at %s. Ask %s to share the file again.",
			h.Path, h.ExpiresAt().Format(time.RFC3339), h.Member)
	}
	if mb := pf.FetchLimitMB(); h.Size > int64(mb)<<20 {
		return nil, roster.Member{}, f.refuse(peerfile.Reason(peerfile.ErrTooLarge), "%s is %d bytes, more than the %d MiB this capsule may fetch (capabilities.peer_fetch.max_mb), so nothing was fetched.",
			h.Path, h.Size, mb)
	}
	return h, peer, nil
}

// target is where in the workdir the file is stored: as, else the base name of the handle's path; a
// clean path relative to the workdir.
func (f *fetching) target(as string, h *peerfile.Handle) (string, error) {
	target := as
	if target == "" {
		target = filepath.Base(filepath.FromSlash(h.Path))
	}
	if err := peerfile.CheckPath(target); err != nil {
		return "", f.refuse("bad_target", "%s. Give \"as\" a name relative to your workdir, such as report.txt.", err)
	}
	target = filepath.Clean(target)
	f.out.Stored = filepath.ToSlash(target)
	return target, nil
}

// checkTarget refuses a target that is a directory, that exists without overwrite, or that a symbolic
// link or a file is in the way of; an existing one replaced is noted in the answer.
func (f *fetching) checkTarget(wd *nofollow.Dir, target string, h *peerfile.Handle, overwrite bool) error {
	stored := f.out.Stored
	switch fi, err := wd.Lstat(target); {
	case err == nil && fi.IsDir():
		return f.refuse(peerfile.Reason(peerfile.ErrTargetExists), "%s is a directory in your workdir, so nothing was stored. Pass \"as\" with the name of a file, such as %s/%s.",
			stored, stored, filepath.Base(h.Path))
	case err == nil && !overwrite:
		return f.refuse(peerfile.Reason(peerfile.ErrTargetExists), "%s already exists in your workdir, so nothing was stored. Pass \"as\" with another name, or \"overwrite\": true to replace it.", stored)
	case err == nil:
		f.out.Replaced = true
	case errors.Is(err, nofollow.ErrSymlink):
		return f.refuse("bad_target", "%s cannot be written inside your workdir: %s is a symbolic link, and the runtime follows none inside the workdir. Give \"as\" another name.", stored, linkOf(err))
	case !errors.Is(err, fs.ErrNotExist):
		return f.refuse("bad_target", "%s cannot be written inside your workdir (a part of it is not a directory). Give \"as\" another name.", stored)
	}
	return nil
}

// store checks the door's answer against the handle and writes its bytes to target: a refusal of the
// door's, other bytes than the handle names, or a failure writing them is a refusal, and stores nothing.
func (f *fetching) store(ctx context.Context, wd *nofollow.Dir, target string, resp *http.Response, h *peerfile.Handle, overwrite bool) error {
	if resp.StatusCode != http.StatusOK {
		return f.pf.doorRefusal(resp, h, f.refuse)
	}
	if d, ok := peerfile.ParseDigest(resp.Header.Get(peerfile.DigestHeader)); ok && d != h.Digest || resp.ContentLength >= 0 && resp.ContentLength != h.Size {
		return f.refuse(peerfile.Reason(peerfile.ErrDigestMismatch), "%s's door offered other bytes than the handle names (its size or SHA-256 differ), so nothing was stored. Ask %s to share the file again.",
			h.Member, h.Member)
	}
	tmp, err := receive(wd, target, resp.Body, h)
	switch {
	case errors.Is(err, peerfile.ErrDigestMismatch):
		return f.refuse(peerfile.Reason(err), "the bytes %s's door sent do not match the handle (%s), so nothing was stored. Try again, or ask %s to share the file again.",
			h.Member, err, h.Member)
	case err != nil && ctx.Err() != nil:
		return f.refuse("canceled", "the transfer of %s stopped before it ended (the task was canceled or it took longer than %s); nothing was stored.", h.Path, peerFileTimeout)
	case err != nil:
		return f.refuse("store_failed", "%s could not be written in your workdir: %s; nothing was stored.", f.out.Stored, errText(err))
	}
	if err := place(wd, tmp, target, overwrite); err != nil {
		_ = wd.Remove(tmp) // cleanup on a failed path: the refusal is what to report
		if errors.Is(err, fs.ErrExist) {
			return f.refuse(peerfile.Reason(peerfile.ErrTargetExists), "%s appeared in your workdir while the file was fetched, so nothing was stored. Pass \"as\" with another name, or \"overwrite\": true to replace it.", f.out.Stored)
		}
		return f.refuse("store_failed", "%s could not be put in place in your workdir: %s; nothing was stored.", f.out.Stored, errText(err))
	}
	return nil
}

// redeem asks peer's door for the file a handle names, with this member's peer credential and the
// trace context of ctx (traceparent, tracestate, baggage), which the door's span continues. Redirects
// are not followed, so the credential goes to the door and nowhere else.
func (pf *Files) redeem(ctx context.Context, doorURL, handle string) (*http.Response, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(doorURL, "/")+"/peer-files/"+handle, nil)
	if err != nil {
		return nil, err
	}
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		conv.Propagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	r.Header.Set("Authorization", "Bearer "+pf.cfg.CredKey.Credential(pf.cfg.Member, peercred.Untrusted))
	hc := http.Client{}
	if pf.cfg.HTTPClient != nil {
		hc = *pf.cfg.HTTPClient
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc.Do(r)
}

// doorRefusal turns a door's refusal into the model's sentence, by the reason the door names.
func (pf *Files) doorRefusal(resp *http.Response, h *peerfile.Handle, refuse func(reason, format string, args ...any) error) error {
	var body struct {
		Reason string `json:"reason"`
	}
	// A body that is not the door's JSON leaves no reason: the refusal then gives the HTTP status.
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	m := h.Member
	switch err := peerfile.FromReason(body.Reason); {
	case errors.Is(err, peerfile.ErrExpired):
		return refuse(body.Reason, "%s's door says the handle for %s has expired. Ask %s to share the file again.", m, h.Path, m)
	case errors.Is(err, peerfile.ErrNotFound):
		return refuse(body.Reason, "%s no longer has %s under its export root: it was renamed or deleted after the handle was minted. Ask %s to share it again.", m, h.Path, m)
	case errors.Is(err, peerfile.ErrChanged), errors.Is(err, peerfile.ErrNotRegular), errors.Is(err, peerfile.ErrOutside), errors.Is(err, peerfile.ErrLink):
		return refuse(body.Reason, "%s changed on %s's side after the handle was minted, so its door did not send it. Ask %s to share it again.", h.Path, m, m)
	case errors.Is(err, peerfile.ErrNotExported):
		return refuse(body.Reason, "%s exports no files now. Ask %s to send the content another way.", m, m)
	case errors.Is(err, peerfile.ErrForged), errors.Is(err, peerfile.ErrWrongFormation), errors.Is(err, peerfile.ErrWrongMember), errors.Is(err, peerfile.ErrMalformed):
		return refuse(body.Reason, "%s's door does not recognise the handle. Copy it exactly as %s sent it, or ask %s to share the file again.", m, m, m)
	case errors.Is(err, peerfile.ErrUnauthenticated), errors.Is(err, peerfile.ErrForbidden):
		return refuse(body.Reason, "%s's door did not accept this member's formation credentials; the operator must give every member the same formation token.", m)
	}
	return refuse("door_error", "%s's door answered with HTTP status %d, so nothing was stored. Try again in a moment.", m, resp.StatusCode)
}

// receive writes the body into a new temporary file beside target, checking its length and SHA-256
// against the handle as it goes, and returns the temporary file's name. Nothing is left behind on failure.
func receive(wd *nofollow.Dir, target string, body io.Reader, h *peerfile.Handle) (string, error) {
	dir := filepath.Dir(target)
	if dir != "." {
		if err := wd.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(dir, ".mur-fetch-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := wd.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			// Already failing: the error returned says what went wrong.
			_ = f.Close()
			_ = wd.Remove(tmp)
		}
	}()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum), io.LimitReader(body, h.Size+1))
	if err != nil {
		return "", err
	}
	var got [sha256.Size]byte
	copy(got[:], sum.Sum(nil))
	switch {
	case n != h.Size:
		return "", &peerfile.Error{Kind: peerfile.ErrDigestMismatch, Detail: fmt.Sprintf("%d bytes arrived, not %d", min(n, h.Size+1), h.Size)}
	case got != h.Digest:
		return "", &peerfile.Error{Kind: peerfile.ErrDigestMismatch, Detail: "their SHA-256 is " + hex.EncodeToString(got[:])}
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	ok = true
	return tmp, nil
}

// place moves tmp to target inside wd: a rename with overwrite; without it a hard link, which fails
// rather than replace a file that appeared meanwhile, then the temporary name is removed.
func place(wd *nofollow.Dir, tmp, target string, overwrite bool) error {
	if overwrite {
		return wd.Rename(tmp, target)
	}
	if err := wd.Link(tmp, target); err != nil {
		return err
	}
	return wd.Remove(tmp)
}

// clip quotes at most 24 characters of a value the model sent, so a refusal does not repeat a long text.
func clip(s string) string {
	if r := []rune(s); len(r) > 24 {
		return fmt.Sprintf("%q…", string(r[:24]))
	}
	return fmt.Sprintf("%q", s)
}

// linkOf names the link a nofollow error found, relative to the workdir.
func linkOf(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	return "a part of the path"
}

// errText is an error of the workdir without anything that could name a path outside it.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}
