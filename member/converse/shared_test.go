package converse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/store"
)

// fakeKeeper keeps artifact files in memory, or fails with err.
type fakeKeeper struct {
	kept map[string][]byte
	err  error
}

func (k *fakeKeeper) KeepArtifactFile(_ context.Context, id a2a.TaskID, name string, body io.Reader) error {
	if k.err != nil {
		return k.err
	}
	b, err := io.ReadAll(body)
	k.kept[string(id)+"/"+name] = b
	return err
}

// TestArtifactsOnReplicas: on a member's replicas a file too large to carry inline moves into the shared
// store (Config.Files) and leaves no copy on disk, its artifact a URL; one the store cannot take stays on
// disk, served by URL still, and the error says so; one the store finds too large is a refusal.
func TestArtifactsOnReplicas(t *testing.T) {
	big := bytes.Repeat([]byte("b"), InlineMax+1)
	run := func(t *testing.T, k *fakeKeeper) (Config, []a2a.Artifact, string, error) {
		t.Helper()
		work := t.TempDir()
		os.MkdirAll(filepath.Join(work, ArtifactsDir, "sub"), 0o755)
		os.WriteFile(filepath.Join(work, ArtifactsDir, "sub", "big.bin"), big, 0o644)
		os.WriteFile(filepath.Join(work, ArtifactsDir, "small.txt"), []byte("small"), 0o644)
		var written []string
		c := Config{DoorURL: "http://door", Workdir: work, ArtifactsRoot: t.TempDir(), Files: k,
			Record: func(kind records.Type, _ string, f map[string]any) error {
				written = append(written, string(kind))
				return nil
			}}
		arts, err := c.Artifacts(t.Context(), &a2a.Task{ID: "tsk_1"}, map[string]Stamp{})
		return c, arts, strings.Join(written, ","), err
	}
	find := func(arts []a2a.Artifact, name string) *a2a.Artifact {
		for i, a := range arts {
			if a.Name == name && len(a.Parts) == 1 {
				return &arts[i]
			}
		}
		return &a2a.Artifact{Parts: []a2a.Part{{}}}
	}
	url := func(arts []a2a.Artifact, name string) string { return find(arts, name).Parts[0].URL }

	t.Run("kept", func(t *testing.T) {
		k := &fakeKeeper{kept: map[string][]byte{}}
		c, arts, _, err := run(t, k)
		if err != nil || url(arts, "sub/big.bin") != "http://door/tasks/tsk_1/artifacts/sub/big.bin" || len(arts) != 2 {
			t.Fatalf("artifacts %+v, %v", arts, err)
		}
		if !bytes.Equal(k.kept["tsk_1/sub/big.bin"], big) || len(k.kept) != 1 {
			t.Errorf("the store kept %d files, big.bin's %d bytes", len(k.kept), len(k.kept["tsk_1/sub/big.bin"]))
		}
		if _, err := os.Stat(filepath.Join(c.ArtifactsRoot, "tsk_1")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a copy stayed on disk: %v", err)
		}
	})
	t.Run("the store fails", func(t *testing.T) {
		c, arts, _, err := run(t, &fakeKeeper{err: errors.New("database down")})
		if err == nil || !strings.Contains(err.Error(), "served by this replica's door only") || url(arts, "sub/big.bin") == "" {
			t.Fatalf("artifacts %+v, %v", arts, err)
		}
		if b, err := os.ReadFile(filepath.Join(c.ArtifactsRoot, "tsk_1", "sub", "big.bin")); err != nil || !bytes.Equal(b, big) {
			t.Errorf("the copy on disk: %d bytes, %v", len(b), err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		c, arts, written, err := run(t, &fakeKeeper{err: store.ErrFileTooLarge})
		if err != nil || len(arts) != 2 || !strings.Contains(find(arts, "sub/big.bin").Text(), "more than the 256 MiB a member run as replicas keeps in its database") {
			t.Fatalf("artifacts %+v, %v", arts, err)
		}
		if written != "artifact_refused" {
			t.Errorf("records %q, want one artifact_refused", written)
		}
		if _, err := os.Stat(filepath.Join(c.ArtifactsRoot, "tsk_1")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a copy stayed on disk: %v", err)
		}
	})
}
