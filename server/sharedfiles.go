package server

import (
	"context"
	"crypto/sha256"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/share"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/postgres"
)

// StoredFiles is what the door of a member run as replicas (DESIGN §16) reads of the files their shared
// store keeps: the copy share-file made of a peer file, and an artifact's file too large to carry
// inline, whichever replica made them. Both errors wrap store.ErrFileNotKept when no such file is kept.
type StoredFiles interface {
	// PeerFile opens the kept peer file of SHA-256 digest and size bytes, unless its last handle expired.
	PeerFile(ctx context.Context, digest [sha256.Size]byte, size int64) (store.SharedFile, error)
	// ArtifactFile opens the kept file of task id's artifact name.
	ArtifactFile(ctx context.Context, id a2a.TaskID, name string) (store.SharedFile, error)
}

// The PostgreSQL store keeps the files of replicas: for the door, share-file and the task's artifacts.
var (
	_ StoredFiles             = (*postgres.Store)(nil)
	_ share.PeerFileKeeper    = (*postgres.Store)(nil)
	_ converse.ArtifactKeeper = (*postgres.Store)(nil)
)

// replicaFiles is the store of replica name as the door's StoredFiles: nil for a member of one process
// (name ""), whose door serves the files of its own workdir.
func replicaFiles(st store.Tasks, name string) StoredFiles {
	f, ok := st.(StoredFiles)
	if name == "" || !ok {
		return nil
	}
	return f
}
