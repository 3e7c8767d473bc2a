package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveCredential(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("sk-secret-from-file\nsecond line\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	env := func(k string) string { return map[string]string{"KEY": " sk-secret-from-env "}[k] }
	for _, tc := range []struct{ ref, want, err string }{
		{"env:KEY", "sk-secret-from-env", ""},
		{"file:" + key, "sk-secret-from-file", ""},
		{"env:MISSING", "", "the environment variable MISSING is not set"},
		{"file:" + filepath.Join(dir, "nope"), "", "no such file"},
		{"file:" + empty, "", "is empty"},
		{"vault:sk-pasted-key", "", "is not env:NAME or file:PATH"},
		{"sk-pasted-key", "", "is not env:NAME or file:PATH"},
	} {
		got, err := ResolveCredential(tc.ref, env)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ResolveCredential(%q) = %q, %v; want %q, %q", tc.ref, got, err, tc.want, tc.err)
		}
		if err != nil && (strings.Contains(err.Error(), "sk-secret") || strings.Contains(err.Error(), "sk-pasted")) {
			t.Errorf("an error carries the secret: %v", err)
		}
	}
}
