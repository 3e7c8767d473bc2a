package share

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/runtimetools"
)

// PeerFileKeeper keeps the bytes of the files share-file shares where every replica of the member reads
// them: the PostgreSQL store the replicas share (DESIGN §16), whose door serves a handle from there.
type PeerFileKeeper interface {
	// KeepPeerFile keeps the bytes of a file of SHA-256 digest and size bytes until expires. When they
	// are kept already, it moves their expiry to the later of the two and does not call open; else it
	// stores the bytes open gives, only if they are that file's: otherwise the error wraps
	// store.ErrFileChanged. An error of open is returned as it is; a file larger than
	// store.MaxSharedFile is refused with store.ErrFileTooLarge.
	KeepPeerFile(ctx context.Context, digest [sha256.Size]byte, size int64, expires time.Time, open func() (io.ReadCloser, error)) error
}

// keep copies f, which share-file found under the export root, into the shared store (Config.Keeper)
// until expires, before a handle for it is minted: a refusal saying why when it cannot, and no handle.
// The file is opened again as the door opens it (peerfile.Open), so it must still be the file f names.
func (pf *Files) keep(ctx context.Context, f peerfile.File, expires time.Time) *runtimetools.Refusal {
	root, _ := pf.ShareSettings()
	refuse := func(reason, format string, args ...any) *runtimetools.Refusal {
		return &runtimetools.Refusal{Reason: reason, Text: "'share-file' refused: " + fmt.Sprintf(format, args...)}
	}
	if f.Size > store.MaxSharedFile {
		return refuse(peerfile.Reason(peerfile.ErrTooLarge), "%s is %d bytes, more than the %d MiB this member, run as replicas, keeps in its database for the door of any replica to serve. Share smaller files: split it first.",
			f.Path, f.Size, store.MaxSharedFile>>20)
	}
	err := pf.cfg.Keeper.KeepPeerFile(ctx, f.Digest, f.Size, expires, func() (io.ReadCloser, error) {
		file, err := peerfile.Open(pf.ExportRoot(), f)
		if err != nil {
			return nil, err
		}
		return file, nil
	})
	var pe *peerfile.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrFileChanged), errors.Is(err, peerfile.ErrChanged):
		return refuse(peerfile.Reason(peerfile.ErrChanged), "%s changed while it was being shared. Share it again once nothing is writing to it.", f.Path)
	case errors.As(err, &pe):
		return refuse(peerfile.Reason(err), "%s. Give the path of a file inside the export root %s, and share it again.", pe.Detail, root)
	case ctx.Err() != nil:
		return refuse("canceled", "the task was canceled while %s was being shared; no handle was minted.", f.Path)
	}
	pf.cfg.Log.Error("share-file: keeping the file in the task store failed", "path", f.Path, "err", err)
	return refuse("store_failed", "%s could not be copied into this member's database, from where the door of any of its replicas serves it, so no handle was minted. Try again in a moment.", f.Path)
}
