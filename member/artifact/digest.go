package artifact

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// DigestPrefix starts every digest.
const DigestPrefix = "sha256:"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether s is a digest as Digest writes it.
func ValidDigest(s string) bool { return digestRE.MatchString(s) }

// Digest returns the payload digest of the artifact directory dir: sha256 over its files in name order,
// each as the length of its slash-separated path relative to dir, the path, the length of its bytes and
// the bytes (each length an 8-byte big-endian unsigned integer), written "sha256:<hex>". Directories
// count only through the files in them.
//
// The lengths make the encoding injective: two different sets of files never hash the same stream. The
// earlier form, path\0bytes\0, was not, because a file's bytes may hold NULs: {a: "x\0b\0y"} and
// {a: "x", b: "y"} both streamed "a\0x\0b\0y\0". A symbolic link, a special file (device, pipe,
// socket) or a name that is not a plain relative path is an error naming it: an artifact is regular
// files only, so what was digested is what runs.
func Digest(dir string) (string, error) {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return "", &Error{File: dir, Msg: "cannot be read: " + errText(err), Fix: "check the artifact directory"}
	case !fi.IsDir():
		return "", &Error{File: dir, Msg: "is " + describeMode(fi.Mode()) + ", not a directory", Fix: "an artifact is a directory of regular files"}
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return &Error{File: path, Msg: "cannot be read: " + errText(err), Fix: "make it readable"}
		}
		if path == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || !filepath.IsLocal(rel) {
			return &Error{File: path, Msg: "is not inside the artifact directory", Fix: "remove it"}
		}
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t.IsRegular():
			files = append(files, filepath.ToSlash(rel))
			return nil
		default:
			return &Error{File: path, Msg: "is " + describeMode(t) + "; an artifact holds regular files and directories only",
				Fix: "replace it with the file it stands for, or remove it"}
		}
	})
	if err != nil {
		return "", err
	}
	// WalkDir's order is per directory ("a" before "a-b", so "a/x" before "a-b"); the digest's is the
	// byte order of the whole path ("a-b" before "a/x").
	slices.Sort(files)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", &Error{File: dir, Msg: "cannot be read: " + errText(err), Fix: "check the artifact directory"}
	}
	defer root.Close()
	h := sha256.New()
	for _, rel := range files {
		if err := hashFile(h, root, rel); err != nil {
			return "", &Error{File: filepath.Join(dir, filepath.FromSlash(rel)), Msg: err.Error(), Fix: "make it a readable regular file"}
		}
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile adds len(path) path len(bytes) bytes to h, through root so that a file swapped for a link
// since the walk can lead nowhere outside the artifact. A file whose length changes while it is read is
// an error: what was hashed must be what its length said.
func hashFile(h hash.Hash, root *os.Root, rel string) error {
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return errors.New("cannot be read: " + errText(err))
	}
	defer func() { _ = f.Close() }() // only read
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return errors.New("is no longer a regular file")
	}
	if strings.ContainsRune(rel, 0) {
		return errors.New("has a NUL in its name")
	}
	writeLen(h, uint64(len(rel)))
	_, _ = io.WriteString(h, rel) // a hash.Hash's Write never fails
	size := fi.Size()
	writeLen(h, uint64(size))
	n, err := io.CopyN(h, f, size)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cannot be read: %s", errText(err))
	}
	if extra, _ := f.Read(make([]byte, 1)); n != size || extra != 0 {
		return errors.New("changed while it was digested")
	}
	return nil
}

// writeLen writes n as 8 bytes, big-endian.
func writeLen(h hash.Hash, n uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	_, _ = h.Write(b[:]) // a hash.Hash's Write never fails
}
