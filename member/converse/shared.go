package converse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// ArtifactKeeper keeps the files of a task's artifacts where every replica of its member reads them:
// the PostgreSQL store the replicas share (DESIGN §16), whose door serves them from there.
type ArtifactKeeper interface {
	// KeepArtifactFile keeps the bytes body gives, up to its end, as the file of task id's artifact
	// name, in place of any kept under that name before; they are removed with the task. More than
	// store.MaxSharedFile bytes is an error wrapping store.ErrFileTooLarge, and nothing is kept.
	KeepArtifactFile(ctx context.Context, id a2a.TaskID, name string, body io.Reader) error
}

// keepTimeout bounds the keeping of one artifact's file in the shared store.
const keepTimeout = 5 * time.Minute

// keepShared moves f, a file too large to carry inline that Collect kept at f.Kept, into the shared
// store (Config.Files), and deletes the copy: f.Kept then names no file, only that the artifact is
// served by URL. A file larger than store.MaxSharedFile becomes a refusal, which says so, and its copy
// is deleted. When the store cannot take it, f is returned as it is, served by this replica's door
// only, with the error saying so.
func (c Config) keepShared(ctx context.Context, id a2a.TaskID, f File) (File, error) {
	ctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	in, err := os.Open(f.Kept)
	if err != nil {
		return f, fmt.Errorf("opening the kept file of artifact %q: %w", f.Name, err)
	}
	var size int64
	if info, err := in.Stat(); err == nil {
		size = info.Size()
	}
	if size <= store.MaxSharedFile {
		err = c.Files.KeepArtifactFile(ctx, id, f.Name, in)
	} else {
		err = store.ErrFileTooLarge
	}
	_ = in.Close() // only read
	switch {
	case errors.Is(err, store.ErrFileTooLarge):
		_ = os.Remove(f.Kept) // litter at worst, removed with the task's keep directory (Artifacts)
		return File{Name: f.Name, MediaType: f.MediaType, Refused: fmt.Sprintf(
			"%s/%s is %d bytes, more than the %d MiB a member run as replicas keeps in its database, from where the door of any replica serves it; write it as several smaller files",
			ArtifactsDir, f.Name, size, store.MaxSharedFile>>20)}, nil
	case err != nil:
		return f, fmt.Errorf("keeping the file of artifact %q in the store the replicas share (it is served by this replica's door only): %w", f.Name, err)
	}
	_ = os.Remove(f.Kept) // litter at worst, removed with the task's keep directory (Artifacts)
	return f, nil
}
