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
	"log/slog"
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
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/runtimetools"
)

// Config is what share-file and fetch-peer-file are given by the session: plain values, read-only.
type Config struct {
	Capsule        *capsule.Capsule
	Roster         *roster.Roster // nil outside a formation
	Member         string
	FormationToken string       // "" outside a formation
	CredKey        peercred.Key // what this member's peer credentials are derived with
	HTTPClient     *http.Client // for the peers' doors
	Now            func() time.Time
	Log            *slog.Logger
	Workdir        string // absolute; fetched files land inside it
	// Keeper, on a member's replicas (DESIGN §16), keeps a copy of each file share-file shares in the
	// store the replicas share, which the door of any replica serves it from; nil for a member of one
	// process, whose door serves the export root.
	Keeper PeerFileKeeper
}

// Files serves one session's share-file (runtimetools.FileSharer) and fetch-peer-file
// (runtimetools.PeerFileFetcher).
type Files struct{ cfg Config }

// New returns the peer-file tools of one session.
func New(cfg Config) *Files { return &Files{cfg: cfg} }

// The defaults of share-file and fetch-peer-file.
const (
	defaultPeerFileTTL = time.Hour // exports.peer_files.ttl
	defaultFetchMB     = 64        // capabilities.peer_fetch.max_mb
	peerFileTimeout    = 5 * time.Minute
)

// ExportRoot is the directory exports.peer_files names, below the workdir; zero when the capsule exports
// nothing. The door serves peer files from it.
func (pf *Files) ExportRoot() peerfile.Root {
	if pf.cfg.Capsule.Exports.PeerFiles == "" {
		return peerfile.Root{}
	}
	return peerfile.Root{Workdir: pf.cfg.Workdir, Dir: filepath.Clean(pf.cfg.Capsule.Exports.PeerFiles)}
}

// ShareSettings returns exports.peer_files as written and how long a handle works
// (runtimetools.FileSharer).
func (pf *Files) ShareSettings() (string, time.Duration) {
	ttl := pf.cfg.Capsule.Exports.PeerFilesTTL
	if ttl <= 0 {
		ttl = defaultPeerFileTTL
	}
	return pf.cfg.Capsule.Exports.PeerFiles, ttl
}

// inFormation reports whether peers can redeem this member's handles and serve it theirs.
func (pf *Files) inFormation() bool { return pf.cfg.Roster != nil && pf.cfg.FormationToken != "" }

// ShareFile mints a handle for one file under the export root (runtimetools.FileSharer).
func (pf *Files) ShareFile(ctx context.Context, path string) (runtimetools.SharedFile, error) {
	root, ttl := pf.ShareSettings()
	if !pf.inFormation() {
		return runtimetools.SharedFile{}, &runtimetools.Refusal{Reason: "not_in_formation",
			Text: "'share-file' mints handles only for a member of a formation, and this session is in none: no peer could redeem one."}
	}
	f, err := peerfile.Inspect(pf.ExportRoot(), path)
	if err != nil {
		var pe *peerfile.Error
		if !errors.As(err, &pe) {
			pf.cfg.Log.Error("share-file: the export root cannot be opened", "root", pf.ExportRoot().String(), "err", err)
			return runtimetools.SharedFile{}, &runtimetools.Refusal{Reason: "internal",
				Text: fmt.Sprintf("'share-file' could not open the export root %s; the operator must check that it is a directory this member can read.", root)}
		}
		hint := ""
		switch {
		case errors.Is(err, peerfile.ErrBadPath), errors.Is(err, peerfile.ErrNotFound):
			hint = fmt.Sprintf(" Give the path of a file inside the export root %s, relative to it, such as report.txt.", root)
		case errors.Is(err, peerfile.ErrNotRegular):
			hint = " share-file shares one regular file per call."
		case errors.Is(err, peerfile.ErrLink):
			hint = fmt.Sprintf(" Only files inside the export root %s can be shared, and it must be a directory, not a link: remove the link, make %s a directory again and copy the file itself into it.", root, root)
		case errors.Is(err, peerfile.ErrChanged):
			hint = " Share it again once nothing is writing to it."
		}
		return runtimetools.SharedFile{}, &runtimetools.Refusal{Reason: peerfile.Reason(err),
			Text: "'share-file' refused: " + pe.Detail + "." + hint}
	}
	expires := pf.cfg.Now().Add(ttl)
	if pf.cfg.Keeper != nil {
		if refusal := pf.keep(ctx, f, expires); refusal != nil {
			return runtimetools.SharedFile{}, refusal
		}
	}
	h := peerfile.Mint(pf.cfg.FormationToken, pf.cfg.Roster.Formation, pf.cfg.Member, f, expires)
	return runtimetools.SharedFile{Handle: h.String(), ID: h.ID(), Name: f.Path, Size: f.Size,
		SHA256: hex.EncodeToString(f.Digest[:]), Expires: h.ExpiresAt()}, nil
}

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
	var out runtimetools.FetchedFile
	sent := false // the door was asked: a failure from then on is the tool's, not a refusal of the call
	refuse := func(reason, format string, args ...any) (runtimetools.FetchedFile, error) {
		r := &runtimetools.Refusal{Reason: reason, Text: "'fetch-peer-file' refused: " + fmt.Sprintf(format, args...), Ran: sent}
		if out.From != "" {
			r.Fields = map[string]any{"from": out.From, "path": out.Name, "handle_id": out.ID}
		}
		pf.cfg.Log.Debug("fetch-peer-file refused", "reason", reason, "from", out.From)
		return runtimetools.FetchedFile{}, r
	}
	if !pf.inFormation() {
		return refuse("not_in_formation", "handles are redeemed only by a member of a formation, and this session is in none.")
	}
	h, err := peerfile.Decode(req.Handle)
	if err != nil {
		return refuse("malformed", "%s is not a peer-file handle: %s. Copy the handle exactly as the member sent it: it starts with %s and has no spaces or line breaks.",
			clip(req.Handle), strings.TrimPrefix(err.Error(), peerfile.ErrMalformed.Error()+": "), peerfile.Prefix)
	}
	formation := pf.cfg.Roster.Formation
	if h.Formation != formation {
		return refuse(peerfile.Reason(peerfile.ErrWrongFormation), "the handle was minted in formation %q, and this member is in formation %q: a handle works only inside the formation that minted it. Ask a member of this formation to share the file.",
			h.Formation, formation)
	}
	peer, ok := pf.cfg.Roster.Member(h.Member)
	if !ok {
		return refuse(peerfile.Reason(peerfile.ErrUnknownMember), "the handle names member %q, which is not in this formation's roster. Copy the handle exactly as the member sent it.", h.Member)
	}
	out.From, out.Name, out.ID, out.Size = h.Member, h.Path, h.ID(), h.Size
	out.SHA256 = hex.EncodeToString(h.Digest[:])
	if h.Verify(pf.cfg.FormationToken) != nil {
		return refuse(peerfile.Reason(peerfile.ErrForged), "the handle's signature does not match, so it was altered or mistyped on its way. Copy it exactly as %s sent it, or ask %s to share the file again.",
			h.Member, h.Member)
	}
	if h.Expired(pf.cfg.Now()) {
		return refuse(peerfile.Reason(peerfile.ErrExpired), "the handle for %s expired at %s. Ask %s to share the file again.",
			h.Path, h.ExpiresAt().Format(time.RFC3339), h.Member)
	}
	if mb := pf.FetchLimitMB(); h.Size > int64(mb)<<20 {
		return refuse(peerfile.Reason(peerfile.ErrTooLarge), "%s is %d bytes, more than the %d MiB this capsule may fetch (capabilities.peer_fetch.max_mb), so nothing was fetched.",
			h.Path, h.Size, mb)
	}
	target := req.As
	if target == "" {
		target = filepath.Base(filepath.FromSlash(h.Path))
	}
	if err := peerfile.CheckPath(target); err != nil {
		return refuse("bad_target", "%s. Give \"as\" a name relative to your workdir, such as report.txt.", err)
	}
	target = filepath.Clean(target)
	out.Stored = filepath.ToSlash(target)
	if !roster.EgressAllowed(peer.URL, pf.cfg.Capsule.Capabilities.Network.Allow) {
		return refuse("egress", "%s's door is outside this capsule's capabilities.network.allow, so nothing was fetched; the operator must add localhost (or %s's host) to it.",
			h.Member, h.Member)
	}
	wd, err := nofollow.Open(pf.cfg.Workdir)
	if err != nil {
		pf.cfg.Log.Error("fetch-peer-file: the workdir cannot be opened", "err", err)
		return refuse("internal", "the workdir cannot be opened, so nothing was stored.")
	}
	defer wd.Close()
	switch fi, err := wd.Lstat(target); {
	case err == nil && fi.IsDir():
		return refuse(peerfile.Reason(peerfile.ErrTargetExists), "%s is a directory in your workdir, so nothing was stored. Pass \"as\" with the name of a file, such as %s/%s.",
			out.Stored, out.Stored, filepath.Base(h.Path))
	case err == nil && !req.Overwrite:
		return refuse(peerfile.Reason(peerfile.ErrTargetExists), "%s already exists in your workdir, so nothing was stored. Pass \"as\" with another name, or \"overwrite\": true to replace it.", out.Stored)
	case err == nil:
		out.Replaced = true
	case errors.Is(err, nofollow.ErrSymlink):
		return refuse("bad_target", "%s cannot be written inside your workdir: %s is a symbolic link, and the runtime follows none inside the workdir. Give \"as\" another name.", out.Stored, linkOf(err))
	case !errors.Is(err, fs.ErrNotExist):
		return refuse("bad_target", "%s cannot be written inside your workdir (a part of it is not a directory). Give \"as\" another name.", out.Stored)
	}

	ctx, cancel := context.WithTimeout(ctx, peerFileTimeout)
	defer cancel()
	sent = true
	ctx = ft.start(ctx, pf.cfg.Member, peer.URL, h)
	resp, err := pf.redeem(ctx, peer.URL, h.String())
	if resp != nil {
		ft.status = resp.StatusCode
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return refuse("canceled", "the task was canceled while %s was being fetched; nothing was stored.", h.Path)
		}
		return refuse("unreachable", "%s's door could not be reached, so nothing was stored. Try again in a moment.", h.Member)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return pf.doorRefusal(resp, h, refuse)
	}
	if d, ok := peerfile.ParseDigest(resp.Header.Get(peerfile.DigestHeader)); ok && d != h.Digest || resp.ContentLength >= 0 && resp.ContentLength != h.Size {
		return refuse(peerfile.Reason(peerfile.ErrDigestMismatch), "%s's door offered other bytes than the handle names (its size or SHA-256 differ), so nothing was stored. Ask %s to share the file again.",
			h.Member, h.Member)
	}
	tmp, err := receive(wd, target, resp.Body, h)
	switch {
	case errors.Is(err, peerfile.ErrDigestMismatch):
		return refuse(peerfile.Reason(err), "the bytes %s's door sent do not match the handle (%s), so nothing was stored. Try again, or ask %s to share the file again.",
			h.Member, err, h.Member)
	case err != nil && ctx.Err() != nil:
		return refuse("canceled", "the transfer of %s stopped before it ended (the task was canceled or it took longer than %s); nothing was stored.", h.Path, peerFileTimeout)
	case err != nil:
		return refuse("store_failed", "%s could not be written in your workdir: %s; nothing was stored.", out.Stored, errText(err))
	}
	if err := place(wd, tmp, target, req.Overwrite); err != nil {
		wd.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return refuse(peerfile.Reason(peerfile.ErrTargetExists), "%s appeared in your workdir while the file was fetched, so nothing was stored. Pass \"as\" with another name, or \"overwrite\": true to replace it.", out.Stored)
		}
		return refuse("store_failed", "%s could not be put in place in your workdir: %s; nothing was stored.", out.Stored, errText(err))
	}
	return out, nil
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
func (pf *Files) doorRefusal(resp *http.Response, h *peerfile.Handle, refuse func(string, string, ...any) (runtimetools.FetchedFile, error)) (runtimetools.FetchedFile, error) {
	var body struct {
		Reason string `json:"reason"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
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
			f.Close()
			wd.Remove(tmp)
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
