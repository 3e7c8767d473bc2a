package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// hintRe finds the commands mur prints for the user to type: "mur …" up to the end of its line, a ";"
// that separates two hints, the ")" that closes a parenthesized hint, or the "   (or: …)" of an answer.
var hintRe = regexp.MustCompile(`mur (?:init|run|check|send|get|cancel|tasks)\b[^;)\n]*`)

// hints returns the commands mur printed in out that start with prefix ("mur send", "mur get", …).
func hints(out, prefix string) []string {
	var found []string
	for _, h := range hintRe.FindAllString(out, -1) {
		if i := strings.Index(h, "   ("); i >= 0 {
			h = h[:i]
		}
		// "(or: deny REASON" is cut above; a trailing "(…" of prose never starts a hint.
		h = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(h), "("))
		if strings.HasPrefix(h, prefix) {
			found = append(found, h)
		}
	}
	return found
}

// hint returns the one command starting with prefix that out holds, failing the test otherwise.
func hint(t *testing.T, out, prefix string) string {
	t.Helper()
	h := hints(out, prefix)
	if len(h) != 1 {
		t.Fatalf("want one %q hint, got %q in:\n%s", prefix, h, out)
	}
	return h[0]
}

// shellWords splits a command line as a POSIX shell does for the quoting mur prints: words separated by
// spaces, single quotes around a word (a quote inside one is closed, escaped and opened again), and
// backslash escapes outside them.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(ch)
		case ch == '\'':
			quoted, inWord = true, true
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '$' || ch == '`' || ch == '"':
			t.Fatalf("the hint %q needs a shell to expand it; mur's hints run as typed", line)
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("the hint %q has an unclosed quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// runHint runs a command mur printed, word for word, as the user would paste it.
func runHint(t *testing.T, ctx context.Context, env func(string) string, line string) (stdout, stderr string, code int) {
	t.Helper()
	args := shellWords(t, line)
	if len(args) == 0 || args[0] != "mur" {
		t.Fatalf("the hint %q does not start with mur", line)
	}
	var out, errb bytes.Buffer
	err := run(ctx, args[1:], env, &out, &errb)
	code = exitCodeFor(err, &errb)
	return out.String(), errb.String(), code
}

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"mur send --roster demo/roster.yaml --wait hello", []string{"mur", "send", "--roster", "demo/roster.yaml", "--wait", "hello"}},
		{"mur send --wait 'make this loud'", []string{"mur", "send", "--wait", "make this loud"}},
		{`mur send --roster '/tmp/a b/it'\''s/roster.yaml' x`, []string{"mur", "send", "--roster", "/tmp/a b/it's/roster.yaml", "x"}},
	} {
		got := shellWords(t, tc.line)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("shellWords(%q) = %q, want %q", tc.line, got, tc.want)
		}
		// What shellQuote writes, shellWords reads back.
		var quoted []string
		for _, w := range tc.want {
			quoted = append(quoted, shellQuote(w))
		}
		if back := shellWords(t, strings.Join(quoted, " ")); strings.Join(back, "|") != strings.Join(tc.want, "|") {
			t.Errorf("shellQuote then shellWords of %q gave %q", tc.want, back)
		}
	}
}
