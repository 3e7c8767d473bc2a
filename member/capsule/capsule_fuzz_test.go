package capsule

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// lineCount is how many lines YAML sees in data: it breaks lines at \n, \r, \r\n, NEL, LS and PS, and
// a break at the end of the file starts no line.
func lineCount(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	n := 1
	last := ' '
	for _, c := range s {
		switch c {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
		last = c
	}
	if strings.ContainsRune("\n\r\u0085\u2028\u2029", last) {
		n-- // a break that ends the file starts no line
	}
	return n
}

// checkCapsuleErrors checks a failed parse of data as the file path: a joined list of errors, each of
// type E, in line order, naming path and a line of data, saying what is wrong and what to write.
func checkCapsuleErrors[E interface {
	*Error
	error
}](t *testing.T, path string, data []byte, err error) {
	t.Helper()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a list of errors: %v", err, err)
	}
	last := 0
	for _, e := range joined.Unwrap() {
		var fe E
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is %T, want %T", e, e, fe)
		}
		var file, msg, fix string
		var line int
		if x, ok := any(fe).(*Error); ok {
			file, line, msg, fix = x.File, x.Line, x.Msg, x.Fix
		}
		switch {
		case file != path:
			t.Fatalf("error %q names file %q, not %q", fe, file, path)
		case line < 0 || line > lineCount(data):
			t.Fatalf("error %q is at line %d of a file of %d lines:\n%q", fe, line, lineCount(data), data)
		case line < last:
			t.Fatalf("errors out of line order: %v", err)
		case strings.TrimSpace(msg) == "" || strings.TrimSpace(fix) == "":
			t.Fatalf("error %q does not say both what is wrong and what to write", fe)
		}
		prefix := path + ":" + strconv.Itoa(line) + ": "
		if line == 0 {
			prefix = path + ": "
		}
		if !strings.HasPrefix(fe.Error(), prefix) {
			t.Fatalf("error %q does not start with %q", fe, prefix)
		}
		last = line
	}
}

// FuzzParseCapsule parses arbitrary bytes as a murmur.yaml. A parse either fails with *Errors at
// lines of the file, or gives a capsule that is exactly one of an agent and a script capsule, with
// its defaults filled in, and parsing the same bytes again gives the same capsule.
func FuzzParseCapsule(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, File)
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("rules: [{match: '', turns: [{say: hi}]}]\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"full", "agent", "script"} {
		data, err := os.ReadFile(filepath.Join("testdata/capsule", name, File))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("name: w\nscript: {command: [a]}\ntask_acceptance: queue\n"))
	f.Add([]byte("name: w\ninference: {driver: l, choices: {l: {driver: script}}}\nscript: {command: [a]}\n"))
	f.Add([]byte("name: w\nmax_turns: 5\n"))
	f.Add([]byte("name: w\nscript: &a {command: [a]}\ncontrol: *a\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(path, data)
		if err != nil {
			checkCapsuleErrors[*Error](t, path, data, err)
			return
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf(format+"\ninput:\n%s", append(args, data)...)
		}
		switch {
		case c.Name == "":
			fail("a capsule without a name parsed")
		case c.Path != path || c.Dir != dir:
			fail("capsule at %q in %q, want %q", c.Path, c.Dir, path)
		case (c.Inference == nil) == (c.Script == nil) || c.IsAgent() != (c.Inference != nil):
			fail("a capsule must be exactly one of an agent (inference:) and a script capsule (script:)")
		case c.Script != nil && len(c.Script.Command) == 0:
			fail("a script capsule without a command parsed")
		case c.Transport != TransportHTTP && c.Transport != TransportProcess:
			fail("transport %q", c.Transport)
		case c.TaskAcceptance != AcceptReject && c.TaskAcceptance != AcceptQueue:
			fail("task_acceptance %q", c.TaskAcceptance)
		case c.TaskAcceptance == AcceptQueue && c.QueueSize < 1:
			fail("a queue of %d tasks", c.QueueSize)
		case c.Deadline < 0:
			fail("a negative deadline %v", c.Deadline)
		}
		if inf := c.Inference; inf != nil {
			if _, ok := inf.Choices[inf.Driver]; !ok {
				fail("inference.driver %q is no declared choice", inf.Driver)
			}
			if len(inf.ChoiceOrder) != len(inf.Choices) {
				fail("choice order %v, choices %v", inf.ChoiceOrder, inf.Choices)
			}
			for _, name := range inf.ChoiceOrder {
				ch, ok := inf.Choices[name]
				if !ok || (ch.Driver != DriverScript && ch.Driver != DriverOpenAI && ch.Driver != DriverAnthropic) {
					fail("choice %q is %+v", name, ch)
				}
			}
			if th := inf.Compaction.Threshold; th < 0 || th > 1 {
				fail("compaction threshold %v", th)
			}
		}
		again, err := Parse(path, data)
		if err != nil || !reflect.DeepEqual(c, again) {
			fail("the same bytes parsed twice differently: %+v, then %+v (%v)", c, again, err)
		}
	})
}
