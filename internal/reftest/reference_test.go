package reftest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/roster"
)

// probeKey is the key no parser knows: written into the mapping at a path, the parser's error for it
// lists the keys that mapping takes.
const probeKey = "zz_probe"

// placeholder is what a <name> segment of a documented path (a key the file chooses) becomes in a probe.
const placeholder = "local"

// refFile is one file the reference documents: how to parse it, and the smallest document its parser
// reads far enough to reach every nested mapping.
type refFile struct {
	name  string
	base  func() map[string]any
	parse func(data []byte) error
}

var refFiles = []refFile{
	{
		name: "roster.yaml",
		base: func() map[string]any {
			return map[string]any{"formation": "probe", "members": []any{map[string]any{"name": "a", "capsule": "./a"}}}
		},
		parse: func(data []byte) error { _, err := roster.Parse("roster.yaml", data); return err },
	},
	{
		name: "murmur.yaml",
		base: func() map[string]any {
			return map[string]any{"name": "probe", "inference": map[string]any{
				"driver": placeholder, "choices": map[string]any{placeholder: map[string]any{"driver": "script"}}}}
		},
		parse: func(data []byte) error { _, err := capsule.Parse("murmur.yaml", data); return err },
	},
	{
		name: "script.yaml",
		base: func() map[string]any {
			return map[string]any{"rules": []any{map[string]any{"match": "", "turns": []any{map[string]any{"say": "hi"}}}}}
		},
		parse: func(data []byte) error { _, err := driver.ParseScript("script.yaml", data); return err },
	},
}

// docKey is one row of the reference.
type docKey struct {
	path string // dotted, with [] for list entries and <name> for keys the file chooses
	typ  string
	line int
}

var (
	sectionRE   = regexp.MustCompile("^## (\\S+\\.yaml)\\s*$")
	rowRE       = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|([^|]*)\\|")
	knownKeysRE = regexp.MustCompile(`known keys: ([A-Za-z0-9_]+(?:, [A-Za-z0-9_]+)*)`)
)

// readReference returns the documented keys of docs/reference.md, by file.
func readReference(t *testing.T) (string, map[string][]docKey) {
	t.Helper()
	const shown = "docs/reference.md"
	path := filepath.Join("..", "..", filepath.FromSlash(shown))
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("cannot read the key reference %s: %v", shown, err)
	}
	defer f.Close()
	out := map[string][]docKey{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := sectionRE.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
			continue
		}
		if m := rowRE.FindStringSubmatch(line); m != nil && section != "" {
			for _, k := range out[section] {
				if k.path == m[1] {
					t.Errorf("%s:%d: %s key %s is listed twice (first at line %d)", shown, n, section, m[1], k.line)
				}
			}
			out[section] = append(out[section], docKey{path: m[1], typ: strings.TrimSpace(m[2]), line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return shown, out
}

// segments splits a documented path into its keys; a key of a list entry keeps its "[]".
func segments(path string) []string {
	if path == "" {
		return nil
	}
	return strings.Split(path, ".")
}

func parent(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

func isPlaceholder(seg string) bool {
	return strings.HasPrefix(seg, "<") && strings.HasSuffix(seg, ">")
}

// probeDoc returns base with an unknown key added to the mapping at path, creating the mappings (and
// one-entry lists, for "[]") on the way and replacing what is not a mapping there.
func probeDoc(base map[string]any, path string) ([]byte, error) {
	cur := base
	for _, seg := range segments(path) {
		list := strings.HasSuffix(seg, "[]")
		key := strings.TrimSuffix(seg, "[]")
		if isPlaceholder(key) {
			key = placeholder
		}
		if list {
			items, _ := cur[key].([]any)
			m, ok := any(nil), false
			if len(items) > 0 {
				m, ok = items[0].(map[string]any)
			}
			if !ok {
				m = map[string]any{}
				cur[key] = []any{m}
			}
			cur = m.(map[string]any)
			continue
		}
		m, ok := cur[key].(map[string]any)
		if !ok {
			m = map[string]any{}
			cur[key] = m
		}
		cur = m
	}
	cur[probeKey] = 1
	return yaml.Marshal(base)
}

// knownKeys parses data and returns the keys the parser's unknown-key error lists for the probe; ok is
// false when the parser did not report the probe as an unknown key (the path is no mapping of fixed
// keys).
func knownKeys(rf refFile, data []byte) (keys []string, ok bool, err error) {
	perr := rf.parse(data)
	if perr == nil {
		return nil, false, nil
	}
	for _, line := range strings.Split(perr.Error(), "\n") {
		if !strings.Contains(line, fmt.Sprintf("unknown key %q", probeKey)) {
			continue
		}
		m := knownKeysRE.FindStringSubmatch(line)
		if m == nil {
			return nil, false, errors.New("the unknown-key error lists no known keys: " + line)
		}
		return strings.Split(m[1], ", "), true, nil
	}
	return nil, false, nil
}

// TestReferenceMatchesParsers checks docs/reference.md against the parsers: for every mapping the docs
// name (the top level, each documented key, each entry of a documented list), it writes an unknown key
// there, parses the file with the real parser, and compares the keys the error says that mapping takes
// with the keys the docs list under it.
func TestReferenceMatchesParsers(t *testing.T) {
	docPath, doc := readReference(t)
	for _, rf := range refFiles {
		t.Run(rf.name, func(t *testing.T) {
			keys := doc[rf.name]
			if len(keys) == 0 {
				t.Fatalf("%s has no section \"## %s\" with a table of keys", docPath, rf.name)
			}
			children := map[string][]string{} // documented fixed-name keys, by parent path
			listed := map[string]bool{}
			for _, k := range keys {
				listed[k.path] = true
				last := k.path[strings.LastIndexByte(k.path, '.')+1:]
				if !isPlaceholder(last) {
					children[parent(k.path)] = append(children[parent(k.path)], strings.TrimSuffix(last, "[]"))
				}
			}
			// Every mapping that could hold keys: the top level, every documented key as a mapping, and
			// every documented key as a list of mappings.
			probes := []string{""}
			for _, k := range keys {
				probes = append(probes, k.path, k.path+"[]")
			}
			probed := map[string]bool{}
			for _, p := range probes {
				data, err := probeDoc(rf.base(), p)
				if err != nil {
					t.Fatal(err)
				}
				known, ok, err := knownKeys(rf, data)
				if err != nil {
					t.Errorf("%s: probing %s: %v", rf.name, where(p), err)
					continue
				}
				if !ok {
					continue
				}
				probed[p] = true
				documented := children[p]
				for _, k := range known {
					if !slices.Contains(documented, k) {
						t.Errorf("%s: the code takes the key %s %s, which %s lacks: add a row for `%s`",
							rf.name, k, where(p), docPath, join(p, k))
					}
				}
				for _, k := range documented {
					if !slices.Contains(known, k) {
						t.Errorf("%s: %s lists `%s`, which the code does not take %s (it takes %s): remove or fix the row",
							rf.name, docPath, join(p, k), where(p), strings.Join(known, ", "))
					}
				}
			}
			// A documented key under a path the code reads as no mapping of fixed keys is not a key.
			for p, ks := range children {
				if probed[p] {
					continue
				}
				for _, k := range ks {
					t.Errorf("%s: %s lists `%s`, but the code reads %s as no mapping of keys: remove or fix the row",
						rf.name, docPath, join(p, k), strings.TrimSuffix(p, "[]"))
				}
			}
			for p := range probed {
				if p != "" && !listed[p] && !listed[strings.TrimSuffix(p, "[]")] {
					t.Errorf("%s: %s lacks a row for %s", rf.name, docPath, p)
				}
			}
		})
	}
}

func where(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
