package capsule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPushAllowAndControlTokens(t *testing.T) {
	load := func(body string) (*Capsule, error) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(body), 0o644)
		return Load(dir)
	}
	c, err := load("name: a\nscript: {command: [cat]}\npush: {allow: ['127.0.0.1', '*.example.com', '10.0.0.0/8', '*']}\ncontrol:\n  tokens: [{id: ops, token_file: ops.token}]\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Push.Allow) != 4 || len(c.Control.Tokens) != 1 || c.Control.Tokens[0].TokenFile != filepath.Join(c.Dir, "ops.token") {
		t.Errorf("parsed %+v %+v", c.Push, c.Control)
	}
	for _, tc := range []struct{ body, says string }{
		{"push: {allow: ['http://x/']}", `murmur.yaml:3: push.allow entry "http://x/" is not a CIDR prefix`},
		{"push: {allow: ['a b']}", `push.allow entry "a b" is not a host name`},
		{"push: {deny: [x]}", "deny"},
		{"control:\n  tokens: [{id: ops}]", "control.tokens[0] needs both id and token_file"},
		{"control:\n  tokens: [{id: a, token_file: x}, {id: a, token_file: y}]", `control.tokens[1].id "a" is used twice`},
		{"control:\n  tokens: {id: a}", "control.tokens must be a list"},
	} {
		_, err := load("name: a\nscript: {command: [cat]}\n" + tc.body + "\n")
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.says)
		}
	}
}
