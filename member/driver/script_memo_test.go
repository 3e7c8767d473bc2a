package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two files of the same script text are compiled once: their Scripts share the rules (the same compiled
// expression), each keeps its own path, and what it reports names its own file.
func TestLoadScriptCompilesATextOnce(t *testing.T) {
	dir := t.TempDir()
	text := "rules:\n  - match: '^only (?P<what>\\w+)$'\n    turns:\n      - say: 'heard {{.what}}'\n"
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := LoadScript(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := LoadScript(b)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Path != a || sb.Path != b {
		t.Fatalf("paths %q and %q, want %q and %q", sa.Path, sb.Path, a, b)
	}
	if sa.Rules[0].re == nil || sa.Rules[0].re != sb.Rules[0].re || sa.Rules[0].Turns[0].say != sb.Rules[0].Turns[0].say {
		t.Fatal("the second file of the same text was compiled again: its rules are not the first one's")
	}
	_, err = NewScript("local", sb).Infer(context.Background(), InferRequest{Task: "something else", Messages: []ChatMessage{{Role: RoleUser, Text: "something else"}}})
	if err == nil || !strings.Contains(err.Error(), b) || strings.Contains(err.Error(), a) {
		t.Fatalf("no rule matches: %v, want an error naming %s alone", err, b)
	}
}

// A text that does not parse is parsed at every load, so that each file's errors name that file.
func TestLoadScriptErrorsNameEachFile(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yaml"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("rules: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadScript(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %v, want an error naming it", name, err)
		}
	}
}

// Past scriptMemoMax bytes of text the memo keeps nothing more, and still parses.
func TestScriptMemoBound(t *testing.T) {
	m := &scriptMemo{rules: map[string][]ScriptRule{}, bytes: scriptMemoMax - 10}
	text := []byte("rules: [{match: '', turns: [{say: 'a longer text than ten bytes'}]}]\n")
	s, err := m.parse("x.yaml", text)
	if err != nil || len(s.Rules) != 1 {
		t.Fatalf("parse: %v, %+v", err, s)
	}
	if len(m.rules) != 0 || m.bytes != scriptMemoMax-10 {
		t.Fatalf("the memo kept %d texts (%d bytes) past its bound", len(m.rules), m.bytes)
	}
}
