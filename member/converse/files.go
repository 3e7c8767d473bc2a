package converse

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ArtifactsDir is where, in its workdir, a task writes the files that become its artifacts.
const ArtifactsDir = "out/artifacts"

// InlineMax is the largest file whose bytes an artifact carries inline; a larger one is served by URL.
const InlineMax = 256 << 10

// Stamp is what a file under ArtifactsDir was before a task ran, to tell the files the task wrote.
type Stamp struct {
	Size    int64
	ModTime time.Time
}

// Snapshot stamps every file under workdir/ArtifactsDir (none when the directory is missing).
func Snapshot(workdir string) map[string]Stamp {
	out := map[string]Stamp{}
	root := filepath.Join(workdir, ArtifactsDir)
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = Stamp{Size: info.Size(), ModTime: info.ModTime()}
		}
		return nil
	})
	return out
}

// File is one file a task wrote under ArtifactsDir: inline (Bytes set) or kept for its URL (Kept, the
// copy's path), or refused (Refused says why; nothing of it is read).
type File struct {
	Name      string // the path below ArtifactsDir, with slashes
	MediaType string
	Size      int64
	Bytes     []byte
	Kept      string
	Refused   string
}

// Collect returns the files under workdir/ArtifactsDir that are new or changed since before, in name
// order. A file larger than InlineMax is copied to keep/<name> (its bytes may change in the workdir
// later). A symlink that leads out of the workdir, or to something that is not a regular file, is
// refused and not read.
func Collect(workdir string, before map[string]Stamp, keep string) ([]File, error) {
	root := filepath.Join(workdir, ArtifactsDir)
	realWork, err := filepath.EvalSymlinks(workdir)
	if err != nil {
		return nil, nil
	}
	var out []File
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		f := File{Name: name, MediaType: MediaType(name)}
		target := p
		if d.Type()&fs.ModeSymlink != 0 {
			resolved, err := filepath.EvalSymlinks(p)
			switch {
			case err != nil:
				f.Refused = fmt.Sprintf("%s/%s is a symlink that leads nowhere (%v); write the file itself there", ArtifactsDir, name, err)
			case !inside(realWork, resolved):
				f.Refused = fmt.Sprintf("%s/%s is a symlink to %s, outside the workdir; write the file itself under %s/", ArtifactsDir, name, resolved, ArtifactsDir)
			}
			target = resolved
		}
		var info fs.FileInfo
		if f.Refused == "" {
			if info, err = os.Stat(target); err != nil || !info.Mode().IsRegular() {
				f.Refused = fmt.Sprintf("%s/%s is not a regular file; write a file there", ArtifactsDir, name)
			}
		}
		if f.Refused != "" {
			out = append(out, f)
			return nil
		}
		if st, ok := before[name]; ok && st.Size == info.Size() && st.ModTime.Equal(info.ModTime()) {
			return nil
		}
		f.Size = info.Size()
		if f.Size <= InlineMax {
			if f.Bytes, err = os.ReadFile(target); err != nil {
				return err
			}
		} else {
			f.Kept = filepath.Join(keep, filepath.FromSlash(name))
			if err := copyFile(target, f.Kept); err != nil {
				return err
			}
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// inside reports whether p is dir or below it.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// textTypes are media types of text files that a host's tables may not list (Go's own lists none of
// them); the same on every host.
var textTypes = map[string]string{
	".txt": "text/plain; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".csv": "text/csv; charset=utf-8",
	".log": "text/plain; charset=utf-8", ".yaml": "application/yaml", ".yml": "application/yaml",
}

// MediaType is the media type of a file by its extension; application/octet-stream when unknown.
func MediaType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := textTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
