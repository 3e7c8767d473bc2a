package docscheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxREADMELines is the README's bound: one page, with the reference under docs/.
const maxREADMELines = 200

// repoDocs returns the README and every Markdown file under docs/.
func repoDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md: the reference lives under docs/")
	}
	return append([]string{"../../README.md"}, docs...)
}

// TestDocsLinks fails on a relative link of README.md or docs/*.md whose file or anchor is missing.
func TestDocsLinks(t *testing.T) {
	problems, err := Check(repoDocs(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s", p)
	}
}

// TestREADMEIsOnePage fails when README.md grows past one page.
func TestREADMEIsOnePage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimRight(string(b), "\n"), "\n") + 1; n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a file under docs/ and link it", n, maxREADMELines)
	}
}

// TestEveryDocIsLinkedFromTheREADME fails on a file under docs/ the README's map does not name.
func TestEveryDocIsLinkedFromTheREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range Links("README.md", string(b)) {
		path, _, _ := strings.Cut(l.Target, "#")
		linked[path] = true
	}
	for _, f := range repoDocs(t)[1:] {
		if rel := "docs/" + filepath.Base(f); !linked[rel] {
			t.Errorf("README.md does not link %s", rel)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Talking to a door": "talking-to-a-door",
		"Sub-capsules and plans: `delegate-task` and `submit-plan`":               "sub-capsules-and-plans-delegate-task-and-submit-plan",
		"Artifacts: names, stores, `murmur.lock` (the `member/artifact` library)": "artifacts-names-stores-murmurlock-the-memberartifact-library",
		"What `deploy/compose.yaml` does":                                         "what-deploycomposeyaml-does",
		"A [linked](other.md) heading":                                            "a-linked-heading",
		"Who may do what: the threat model":                                       "who-may-do-what-the-threat-model",
		"snake_case kept":                                                         "snake_case-kept",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.md", "# A\n\n## Part one\n\n[ok](b.md#part-two) [ok](#part-one) [bad](#part-three)\n"+
		"[gone](missing.md) [bad anchor](b.md#nope) `[code](nowhere.md)` [web](https://example.com/x#y)\n"+
		"```\n[in a fence](nowhere.md)\n```\n![img](b.md)\n")
	write("b.md", "# B\n\n## Part two\n\n## Part two\n")
	problems, err := Check([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Target)
	}
	want := []string{"#part-three", "missing.md", "b.md#nope"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems %q, want %q", got, want)
	}
	if an := Anchors("## Part two\n\n## Part two\n"); !an["part-two"] || !an["part-two-1"] {
		t.Errorf("a repeated heading's anchors: %v", an)
	}
}
