package capsule

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/murmur-run/murmur/internal/yamldoc/yamldoctest"
)

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
			yamldoctest.CheckErrors(t, path, data, err, func(e *Error) yamldoctest.Fields {
				return yamldoctest.Fields{File: e.File, Line: e.Line, Msg: e.Msg, Fix: e.Fix}
			})
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
