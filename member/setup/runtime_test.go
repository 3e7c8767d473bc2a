package setup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runtimeRoot makes a runtime root holding two sessions' directories (one with a link out of it to a
// file that must survive), a file named like a session, and an entry that is no session's; it returns
// the root and the file linked to.
func runtimeRoot(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "run")
	outside = filepath.Join(base, "outside", "keep")
	os.MkdirAll(filepath.Dir(outside), 0o755)
	os.WriteFile(outside, []byte("keep"), 0o644)
	for _, d := range []string{"ses_a/tools/x", "ses_b", "notes"} {
		os.MkdirAll(filepath.Join(root, d), 0o700)
	}
	os.WriteFile(filepath.Join(root, "ses_a", "tools", "x", "murmur.yaml"), []byte("name: x\n"), 0o600)
	os.WriteFile(filepath.Join(root, "ses_c"), nil, 0o600)
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(root, "ses_a", "escape")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func entriesOf(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// ClearRuntimeRoot removes every session's entry, follows no link, leaves what is no session's; a
// missing root is nothing to clear.
func TestClearRuntimeRoot(t *testing.T) {
	root, outside := runtimeRoot(t)
	removed, err := ClearRuntimeRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ses_a", "ses_b", "ses_c"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	if got := entriesOf(t, root); !slices.Equal(got, []string{"notes"}) {
		t.Errorf("left %v, want only the entry that is no session's", got)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the file a session's directory linked to: %v", err)
	}
	if removed, err := ClearRuntimeRoot(filepath.Join(root, "missing")); err != nil || removed != nil {
		t.Errorf("a missing root: %v %v, want nothing", removed, err)
	}
}

// RemoveRuntimeDir removes its session's directory and nothing else: not a sibling's, not what a link in
// it points to. A session that staged nothing, or has no runtime root, has nothing to remove.
func TestRemoveRuntimeDir(t *testing.T) {
	root, outside := runtimeRoot(t)
	if err := RemoveRuntimeDir(root, "ses_a"); err != nil {
		t.Fatal(err)
	}
	if got := entriesOf(t, root); !slices.Equal(got, []string{"notes", "ses_b", "ses_c"}) {
		t.Errorf("left %v, want all but ses_a", got)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the file ses_a linked to: %v", err)
	}
	for _, tc := range []struct{ root, session string }{{root, "ses_gone"}, {"", "ses_b"}, {filepath.Join(root, "missing"), "ses_b"}} {
		if err := RemoveRuntimeDir(tc.root, tc.session); err != nil {
			t.Errorf("RemoveRuntimeDir(%q, %q): %v, want nothing to do", tc.root, tc.session, err)
		}
	}
	for _, bad := range []string{"", "ses_", "notes", "ses_b/../notes", "..", "/ses_b"} {
		if err := RemoveRuntimeDir(root, bad); err == nil || !strings.Contains(err.Error(), "is not a session id") {
			t.Errorf("RemoveRuntimeDir(%q): %v, want it refused as no session id", bad, err)
		}
	}
	if got := entriesOf(t, root); !slices.Equal(got, []string{"notes", "ses_b", "ses_c"}) {
		t.Errorf("after the refusals: %v", got)
	}
}

// A root that is a symbolic link, or no directory, is refused by both, and nothing is removed.
func TestRuntimeRootRefused(t *testing.T) {
	target, _ := runtimeRoot(t)
	link := filepath.Join(t.TempDir(), "run")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "run")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		root string
		want string
	}{
		{link, "is a symbolic link"},
		{file, "is not a directory"},
	} {
		_, err := ClearRuntimeRoot(tc.root)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.root) {
			t.Errorf("ClearRuntimeRoot(%s): %v, want it refused saying %q", tc.root, err, tc.want)
		}
		if err := RemoveRuntimeDir(tc.root, "ses_b"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RemoveRuntimeDir(%s): %v, want it refused saying %q", tc.root, err, tc.want)
		}
	}
	if _, err := ClearRuntimeRoot(link); !errors.Is(err, ErrRuntimeRootLink) {
		t.Errorf("a linked root's error %v is not ErrRuntimeRootLink", err)
	}
	if got := entriesOf(t, target); !slices.Equal(got, []string{"notes", "ses_a", "ses_b", "ses_c"}) {
		t.Errorf("behind the link: %v, want everything left", got)
	}
}
