package share

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/murmur-run/murmur/internal/peercred"
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
