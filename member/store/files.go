package store

import (
	"crypto/sha256"
	"errors"
	"io"
	"time"
)

// MaxSharedFile is the largest file the replicas of a member keep in the store they share (DESIGN §16):
// a peer file share-file copies there, an artifact file too large to carry inline. Where such a file is
// made, a larger one is refused, saying so; the store refuses one too.
const MaxSharedFile = 256 << 20

// The failures of the files a shared store keeps, matched with errors.Is.
var (
	// ErrFileNotKept: the store keeps no such file (never kept, expired, or removed with its task).
	ErrFileNotKept = errors.New("member: the file is not kept in the task store")
	// ErrFileChanged: the bytes handed over to be kept are not the file they were said to be: another
	// size or another SHA-256 (the file changed while it was read).
	ErrFileChanged = errors.New("member: the file's bytes are not the ones named")
	// ErrFileTooLarge: the bytes handed over to be kept are more than MaxSharedFile.
	ErrFileTooLarge = errors.New("member: the file is larger than a shared store keeps")
)

// SharedFile is a file kept in a store the replicas of a member share, as any of them reads it back.
type SharedFile struct {
	Size   int64
	SHA256 [sha256.Size]byte
	Kept   time.Time // when it was stored
	// Body reads its bytes from the store as they are asked for, a part at a time, so that a large file
	// is never held in memory whole; a file removed while it is read (its task removed, its handles
	// expired) fails the read with ErrFileNotKept.
	Body io.ReadSeeker
}
