package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// The files a member's replicas share (DESIGN §16): the bytes of a peer file share-file minted a handle
// for, and of an artifact file too large to carry inline, kept in the database so that the door of any
// replica serves them, whichever replica made them. Tables shared_files and shared_file_chunks
// (migration 7). A file is written in one transaction, so a reader sees all of it or nothing, and read
// back a chunk at a time (store.SharedFile.Body), so that neither side holds a large file in memory
// nor keeps a connection while a slow client reads.

// fileChunk is the bytes of one row of shared_file_chunks: what a reader holds in memory at once.
const fileChunk = 1 << 20

// The kinds of shared_files' rows.
const (
	peerKind     = "peer"
	artifactKind = "artifact"
)

// KeepPeerFile keeps the bytes of a peer file of SHA-256 digest and size bytes until expires (the
// expiry of the handle share-file mints for it). A file of that digest kept already (shared before, by
// any replica) has its expiry moved to the later of the two, and open is not called; otherwise the
// bytes open gives are stored, in one transaction, only if they are size bytes with that digest: else
// the error wraps store.ErrFileChanged and nothing is stored. An error of open is returned as it is. A
// file larger than the store's limit (store.MaxSharedFile) is refused with store.ErrFileTooLarge.
func (s *Store) KeepPeerFile(ctx context.Context, digest [sha256.Size]byte, size int64, expires time.Time, open func() (io.ReadCloser, error)) error {
	if size > store.MaxSharedFile {
		return fmt.Errorf("member: keeping a peer file of %d bytes: %w (%d bytes)", size, store.ErrFileTooLarge, store.MaxSharedFile)
	}
	what := fmt.Sprintf("keeping the peer file of SHA-256 %x", digest)
	until := expires.UnixMilli()
	if kept, err := extendPeerFile(ctx, s.pool, digest, until); err != nil || kept {
		if err != nil {
			return s.fileFail(what, err)
		}
		return nil
	}
	body, err := open()
	if err != nil {
		return err
	}
	defer body.Close()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO shared_files (kind, size, sha256, created, expires) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (sha256) WHERE kind = 'peer' DO NOTHING RETURNING id`,
			peerKind, size, digest[:], s.now().UnixMilli(), until).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			// Another replica kept the same bytes since: this one's expiry is all that is left to keep.
			_, err = extendPeerFile(ctx, tx, digest, until)
			return err
		}
		if err != nil {
			return err
		}
		n, sum, err := writeChunks(ctx, tx, id, body, size)
		switch {
		case errors.Is(err, store.ErrFileTooLarge):
			return fmt.Errorf("%w: it is more than the %d bytes the handle names", store.ErrFileChanged, size)
		case err != nil:
			return err
		case n != size || sum != digest:
			return fmt.Errorf("%w: %d bytes were read, with SHA-256 %x; the handle names %d bytes, with SHA-256 %x", store.ErrFileChanged, n, sum, size, digest)
		}
		return nil
	})
	if err != nil {
		return s.fileFail(what, err)
	}
	return nil
}

// extendPeerFile moves the expiry of the kept peer file of digest to until when that is later, and
// reports whether one is kept.
func extendPeerFile(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, digest [sha256.Size]byte, until int64) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE shared_files SET expires = GREATEST(expires, $2) WHERE kind = 'peer' AND sha256 = $1`, digest[:], until)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// PeerFile opens the kept peer file of SHA-256 digest and size bytes, unless its last handle has expired
// by the store's clock. The error wraps store.ErrFileNotKept when there is none.
func (s *Store) PeerFile(ctx context.Context, digest [sha256.Size]byte, size int64) (store.SharedFile, error) {
	return s.openFile(ctx, fmt.Sprintf("the peer file of SHA-256 %x", digest),
		`SELECT id, size, sha256, created FROM shared_files WHERE kind = 'peer' AND sha256 = $1 AND size = $2 AND expires > $3`,
		digest[:], size, s.now().UnixMilli())
}

// KeepArtifactFile keeps the bytes body gives, up to its end, as the file of task id's artifact name, in
// place of any kept under that name before; they are removed with the task. The task must be stored.
// More bytes than the store's limit (store.MaxSharedFile) are refused with store.ErrFileTooLarge, and
// nothing is stored.
func (s *Store) KeepArtifactFile(ctx context.Context, id a2a.TaskID, name string, body io.Reader) error {
	return s.keepArtifactFile(ctx, id, name, body, store.MaxSharedFile)
}

// keepArtifactFile is KeepArtifactFile with a limit of its own (tests keep theirs small).
func (s *Store) keepArtifactFile(ctx context.Context, id a2a.TaskID, name string, body io.Reader, limit int64) error {
	what := fmt.Sprintf("keeping the file of artifact %q of task %s", name, id)
	if !storable(string(id)) || !storable(name) {
		return fmt.Errorf("member: %s: the task's id or the artifact's name is not text PostgreSQL can hold (valid UTF-8 without NUL)", what)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM shared_files WHERE task_id = $1 AND name = $2`, string(id), name); err != nil {
			return err
		}
		var fid int64
		if err := tx.QueryRow(ctx, `INSERT INTO shared_files (kind, task_id, name, size, sha256, created) VALUES ($1, $2, $3, 0, '', $4) RETURNING id`,
			artifactKind, string(id), name, s.now().UnixMilli()).Scan(&fid); err != nil {
			return err
		}
		n, sum, err := writeChunks(ctx, tx, fid, body, limit)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE shared_files SET size = $2, sha256 = $3 WHERE id = $1`, fid, n, sum[:])
		return err
	})
	if err != nil {
		return s.fileFail(what, err)
	}
	return nil
}

// ArtifactFile opens the kept file of task id's artifact name. The error wraps store.ErrFileNotKept
// when there is none.
func (s *Store) ArtifactFile(ctx context.Context, id a2a.TaskID, name string) (store.SharedFile, error) {
	what := fmt.Sprintf("the file of artifact %q of task %s", name, id)
	if !storable(string(id)) || !storable(name) {
		return store.SharedFile{}, fmt.Errorf("member: %s: %w", what, store.ErrFileNotKept)
	}
	return s.openFile(ctx, what, `SELECT id, size, sha256, created FROM shared_files WHERE task_id = $1 AND name = $2`, string(id), name)
}

// writeChunks writes what body gives, up to its end, as the chunks of file id, and returns how many
// bytes it wrote and their SHA-256. More than limit bytes is store.ErrFileTooLarge, found before the
// chunk that passes it is written; an error of body is returned wrapped in a readError.
func writeChunks(ctx context.Context, tx pgx.Tx, id int64, body io.Reader, limit int64) (int64, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h := sha256.New()
	in := io.LimitReader(body, limit+1)
	buf := make([]byte, fileChunk)
	var total int64
	for n := 0; ; n++ {
		got, err := io.ReadFull(in, buf)
		if got > 0 {
			if total += int64(got); total > limit {
				return total, sum, fmt.Errorf("%w: more than %d bytes", store.ErrFileTooLarge, limit)
			}
			h.Write(buf[:got])
			if _, err := tx.Exec(ctx, `INSERT INTO shared_file_chunks (file_id, n, body) VALUES ($1, $2, $3)`, id, n, buf[:got]); err != nil {
				return total, sum, err
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return total, sum, &readError{err: err}
		}
	}
	copy(sum[:], h.Sum(nil))
	return total, sum, nil
}

// readError is a failure to read the bytes handed over to be kept: the caller's, not the database's.
type readError struct{ err error }

func (e *readError) Error() string { return "reading the file to keep: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// openFile reads the row query selects (id, size, sha256, created) and returns the file it names, its
// body read a chunk at a time from the store.
func (s *Store) openFile(ctx context.Context, what, query string, args ...any) (store.SharedFile, error) {
	var id, created int64
	var digest []byte
	f := store.SharedFile{}
	err := s.pool.QueryRow(ctx, query, args...).Scan(&id, &f.Size, &digest, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.SharedFile{}, fmt.Errorf("member: %s: %w", what, store.ErrFileNotKept)
	}
	if err != nil {
		return store.SharedFile{}, s.fail("reading "+what, retryRead, err)
	}
	copy(f.SHA256[:], digest)
	f.Kept = time.UnixMilli(created).UTC()
	f.Body = &chunkReader{ctx: ctx, s: s, what: what, id: id, size: f.Size, loaded: -1}
	return f, nil
}

// chunkReader reads a kept file's chunks as they are asked for, holding one at a time.
type chunkReader struct {
	// ctx is the reading request's: io.ReadSeeker's methods take none, and the reader lives only as long
	// as the request that opened it (the door's response).
	ctx    context.Context
	s      *Store
	what   string
	id     int64
	size   int64
	off    int64  // where the next Read starts
	loaded int64  // the number of the chunk buf holds; -1 for none
	buf    []byte // chunk loaded
}

// Read reads from the chunk that holds the offset, loading it first when it is not the one held.
func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := r.off / fileChunk
	if n != r.loaded {
		if err := r.load(n); err != nil {
			return 0, err
		}
	}
	got := copy(p, r.buf[r.off-n*fileChunk:])
	r.off += int64(got)
	return got, nil
}

// load reads chunk n, which must be as long as the file's size says.
func (r *chunkReader) load(n int64) error {
	want := min(fileChunk, r.size-n*fileChunk)
	var body []byte
	err := r.s.pool.QueryRow(r.ctx, `SELECT body FROM shared_file_chunks WHERE file_id = $1 AND n = $2`, r.id, n).Scan(&body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("member: %s was removed while it was read: %w", r.what, store.ErrFileNotKept)
	case err != nil:
		return r.s.fail("reading "+r.what, retryRead, err)
	case int64(len(body)) != want:
		return fmt.Errorf("member: %s: its part %d is %d bytes, not %d", r.what, n, len(body), want)
	}
	r.buf, r.loaded = body, n
	return nil
}

// Seek moves the offset of the next Read, as io.Seeker says; past the end is allowed and reads nothing.
func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	case io.SeekStart:
	default:
		return r.off, fmt.Errorf("member: seeking %s: whence %d is none of io.SeekStart, io.SeekCurrent, io.SeekEnd", r.what, whence)
	}
	if offset < 0 {
		return r.off, fmt.Errorf("member: seeking %s: offset %d is before its start", r.what, offset)
	}
	r.off = offset
	return offset, nil
}

// fileFail wraps an error of keeping a file: the failures of the bytes themselves (too large, not the
// ones named, unreadable) as they are, the database's as fail does.
func (s *Store) fileFail(what string, err error) error {
	var re *readError
	if errors.Is(err, store.ErrFileTooLarge) || errors.Is(err, store.ErrFileChanged) || errors.As(err, &re) {
		return fmt.Errorf("member: %s: %w", what, err)
	}
	return s.fail(what, retryWrite, err)
}

// sweepFiles removes the peer files whose last handle has expired, a few at a time, and returns how many
// it removed. The sweeper calls it after each sweep of the tasks; an artifact's file goes with its task.
func (s *Store) sweepFiles(ctx context.Context) (int, error) {
	removed := 0
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM shared_files WHERE id IN
			(SELECT id FROM shared_files WHERE kind = 'peer' AND expires <= $1 LIMIT $2)`, s.now().UnixMilli(), sweepFileChunk)
		if err != nil {
			return removed, s.fail("removing expired peer files", "the member keeps running and sweeps again later", err)
		}
		removed += int(tag.RowsAffected())
		if tag.RowsAffected() < sweepFileChunk {
			return removed, nil
		}
	}
}

// sweepFileChunk is how many expired peer files one statement of sweepFiles removes, with their chunks.
const sweepFileChunk = 16
