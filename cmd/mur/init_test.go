package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInitThenRunThenSend is a new user's first minutes: mur init writes a formation that mur check
// passes, mur run serves it, and every command mur init and mur run print works as printed from the
// folder the user stands in. Only the ports differ from what mur init wrote: a test never listens on a
// fixed port.
func TestInitThenRunThenSend(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"init", "demo"}, env, &out, &errb); err != nil {
		t.Fatalf("mur init demo: %v\n%s", err, errb.String())
	}
	for _, f := range []string{"roster.yaml", "entry/murmur.yaml", "entry/script.yaml", "worker/murmur.yaml", "worker/script.yaml", ".gitignore"} {
		if _, err := os.Stat(filepath.Join("demo", f)); err != nil {
			t.Errorf("mur init wrote no %s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "wrote the demo formation") {
		t.Errorf("mur init's output:\n%s", out.String())
	}
	runLine := hint(t, out.String(), "mur run")
	sendLine := hint(t, out.String(), "mur send")
	if runLine != "mur run --roster demo/roster.yaml" || sendLine != "mur send --roster demo/roster.yaml --wait 'make this loud'" {
		t.Errorf("mur init printed %q and %q", runLine, sendLine)
	}

	// mur check passes, with no warning either.
	out.Reset()
	if err := run(context.Background(), []string{"check", "--roster", "demo/roster.yaml"}, env, &out, &errb); err != nil ||
		!strings.Contains(out.String(), "2 member(s), 0 error(s), 0 warning(s)") {
		t.Fatalf("mur check on what mur init wrote: %v\n%s", err, out.String())
	}

	// The ports mur init wrote, moved to free ones.
	b, err := os.ReadFile("demo/roster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "listen: 127.0.0.1:7501") || !strings.Contains(text, "listen: 127.0.0.1:7502") {
		t.Fatalf("mur init's roster lists other ports than 7501 and 7502:\n%s", text)
	}
	ports := freeAddrs(t, 2)
	text = strings.NewReplacer("127.0.0.1:7501", ports[0], "127.0.0.1:7502", ports[1]).Replace(text)
	if err := os.WriteFile("demo/roster.yaml", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	runOut := startMur(t, shellWords(t, runLine)[1:], env)
	waitOutput(t, runOut, regexp.MustCompile(`(?m)^\s+worker\s+http://\S+/a2a$`), 1)
	ctx := context.Background()

	// The send mur init printed: entry hands the text to worker, whose shell tool writes it in capitals.
	sout, serr, code := runHint(t, ctx, env, sendLine)
	if code != 0 || !strings.HasPrefix(sout, "worker says: worker ran tr a-z A-Z on it:") || !strings.Contains(sout, "\nMAKE THIS LOUD") {
		t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", sendLine, code, sout, serr)
	}
	// The conversation goes on as the hint says.
	if sout, serr, code = runHint(t, ctx, env, hint(t, serr, "mur send")); code != 0 || !strings.Contains(sout, "TEXT") {
		t.Errorf("continuing the conversation: exit %d\nstdout %s\nstderr %s", code, sout, serr)
	}

	// The send mur run printed: entry answers a greeting itself.
	tryLine := hint(t, waitOutput(t, runOut, regexp.MustCompile(`(?m)^try:\n  (mur send .*)$`), 1)[0][1], "mur send")
	if tryLine != "mur send --roster demo/roster.yaml --wait hello" {
		t.Errorf("mur run printed %q", tryLine)
	}
	if sout, serr, code = runHint(t, ctx, env, tryLine); code != 0 || !strings.HasPrefix(sout, "Hello from entry") {
		t.Errorf("%s: exit %d\nstdout %s\nstderr %s", tryLine, code, sout, serr)
	}

	// What the greeting suggests: entry's own shell tool counts the words.
	if sout, serr, code = runHint(t, ctx, env, "mur send --roster demo/roster.yaml --wait 'count to be or not to be'"); code != 0 ||
		!strings.HasPrefix(sout, "entry counted the words with wc -w:") || !strings.HasSuffix(sout, "\n6\n\n") {
		t.Errorf("count: exit %d\nstdout %q\nstderr %s", code, sout, serr)
	}
}

func TestInitRefusesToOverwrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing []string // files there before mur init
		args     []string
		code     int
		stderr   []string
	}{
		{"a roster", []string{"roster.yaml"}, []string{"init", "DIR"}, 2,
			[]string{"DIR/roster.yaml already exists: mur init replaces no file, so nothing was written", "mur init my-formation", "move those files away"}},
		{"a script", []string{"entry/script.yaml", "worker/murmur.yaml"}, []string{"init", "DIR"}, 2,
			[]string{"DIR/entry/script.yaml, DIR/worker/murmur.yaml already exist: mur init replaces no file"}},
		{"a file for a folder", nil, []string{"init", "DIR/file"}, 2, []string{"DIR/file is a file, not a folder"}},
		{"two folders", nil, []string{"init", "DIR/a", "DIR/b"}, 2, []string{"mur init takes one folder, not 2"}},
		{"a .gitignore", []string{".gitignore"}, []string{"init", "DIR"}, 0,
			[]string{"kept the existing DIR/.gitignore: add .murmur/ to it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "file"), []byte("mine\n"), 0o644)
			for _, f := range tc.existing {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), []byte("mine\n"), 0o644)
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "DIR", dir)
			}
			var out, errb bytes.Buffer
			err := run(context.Background(), args, noEnv, &out, &errb)
			if code := exitCodeFor(err, &errb); code != tc.code {
				t.Fatalf("mur %v: exit %d, want %d\n%s%s", args, code, tc.code, out.String(), errb.String())
			}
			for _, want := range tc.stderr {
				if want = strings.ReplaceAll(want, "DIR", dir); !strings.Contains(errb.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errb.String())
				}
			}
			// What was there is untouched; on a refusal nothing else was written.
			for _, f := range append(tc.existing, "file") {
				if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != "mine\n" {
					t.Errorf("%s was changed: %q", f, b)
				}
			}
			if tc.code != 0 {
				entries, _ := os.ReadDir(dir)
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				want := len(topLevel(tc.existing)) + 1 // and "file"
				if len(names) != want {
					t.Errorf("the folder holds %v after a refusal", names)
				}
			}
		})
	}
}

// topLevel returns the distinct first elements of paths.
func topLevel(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		out[strings.SplitN(p, "/", 2)[0]] = true
	}
	return out
}

func TestFormationName(t *testing.T) {
	for in, want := range map[string]string{"demo": "demo", "My Formation": "my-formation", "--": "first", "/": "first", "a_b.c": "a-b-c"} {
		if got := formationName(in); got != want {
			t.Errorf("formationName(%q) = %q, want %q", in, got, want)
		}
	}
}
