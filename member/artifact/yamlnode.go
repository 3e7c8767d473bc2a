package artifact

// The YAML helpers of this file read one file through yaml.v3 nodes, so that every problem carries its
// line, and collect the problems instead of stopping at the first. They follow roster/parse.go and
// member/capsule.go and are meant to be replaced by internal/yamldoc once it exists: everything below
// moves there unchanged (Error, yamlDoc and its methods, the yaml* functions).

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"
)

// Error is one problem in a YAML file of this package (an artifact's murmur.yaml, murmur.lock,
// sources.yaml), or in an artifact's files: where it is, what is wrong, and what to write instead.
type Error struct {
	File string
	Line int // 0 when the problem concerns the whole file
	Msg  string
	Fix  string
}

// Error formats e as FILE:LINE: MSG; FIX, leaving out the line when it is 0 and the fix when it is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// yamlDoc collects the problems of one file.
type yamlDoc struct {
	file     string
	errs     []yamlLineErr
	misspelt map[string]bool // dotted key paths an unknown key was taken to misspell
}

type yamlLineErr struct {
	line int
	err  error
}

type yamlField struct {
	name string
	fn   func(k, v *yaml.Node)
}

func (d *yamlDoc) add(line int, msg, fix string) {
	d.addErr(line, &Error{File: d.file, Line: line, Msg: msg, Fix: fix})
}

// addErr records a problem the caller built, such as a *Error wrapped with a sentinel.
func (d *yamlDoc) addErr(line int, err error) {
	d.errs = append(d.errs, yamlLineErr{line, err})
}

// err returns every problem in line order, joined; nil when there is none.
func (d *yamlDoc) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].line < d.errs[j].line })
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e.err
	}
	return errors.Join(errs...)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// maxExpandedNodes bounds the values a file may hold once its aliases are expanded, so that a few
// nested aliases cannot make the decoder walk billions of nodes.
const maxExpandedNodes = 100_000

// root parses data and returns its top-level mapping, or nil after recording why there is none. example
// is what a right file starts with, for the fix.
func (d *yamlDoc) root(data []byte, example string) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
			line = yamlProblemLine(data, line)
		}
		d.add(line, "not valid YAML: "+msg,
			"fix the syntax there: indent with spaces only, and quote text that holds \": \" or starts with one of {[*&!|>%@'\"")
		return nil
	}
	if len(doc.Content) == 0 || yamlIsNull(yamlDeref(doc.Content[0])) {
		d.add(1, "the file is empty", "write "+example)
		return nil
	}
	if yamlExpandedSize(doc.Content[0], map[*yaml.Node]int{}) > maxExpandedNodes {
		d.add(1, fmt.Sprintf("the file expands to more than %d values through its aliases", maxExpandedNodes),
			"write the values out instead of nesting *aliases")
		return nil
	}
	n := yamlDeref(doc.Content[0])
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, "the file must be a mapping of keys, not "+yamlDescribe(n), "write "+example)
		return nil
	}
	return n
}

// yamlLastLine returns the number of the last line of data as YAML counts lines: it breaks them at \n,
// \r, \r\n, NEL, LS and PS, and a break that ends the file starts no line.
func yamlLastLine(data []byte) int {
	n, prev := 1, rune(0)
	for _, c := range string(data) {
		switch {
		case c == '\n' && prev == '\r':
		case c == '\n', c == '\r', c == '\u0085', c == '\u2028', c == '\u2029':
			n++
		}
		prev = c
	}
	if strings.ContainsRune("\n\r\u0085\u2028\u2029", prev) {
		n--
	}
	return max(n, 1)
}

// yamlProblemLine narrows down where a syntax error is. yaml.v3 names the line where the enclosing
// block starts (its "context"), which can be far above the mistake, or, when the block left open at the
// end of the file began on its first line, the line after the file's end. This finds the shortest run of
// the file's lines from the reported one on that already fails to parse: its last line is where the
// mistake is. (roster/parse.go's problemLine, which this follows.)
func yamlProblemLine(data []byte, reported int) int {
	last := yamlLastLine(data)
	from := reported
	if from > last {
		from, reported = 1, last
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > 5000 {
		return reported
	}
	for k := max(from, 1); k <= len(lines); k++ {
		var n yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) != nil {
			return k
		}
	}
	return reported
}

// yamlExpandedSize counts the values under n with every alias expanded.
func yamlExpandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = maxExpandedNodes + 1 // an alias cycle counts as too large
	size := 1
	if n.Kind == yaml.AliasNode {
		size = yamlExpandedSize(n.Alias, memo)
	}
	for _, c := range n.Content {
		size += yamlExpandedSize(c, memo)
		if size > maxExpandedNodes {
			break
		}
	}
	memo[n] = size
	return size
}

// fields walks the mapping n, the value of path ("" for the top level), handing each known key's value
// to its field; it reports unknown keys (with the nearest known one) and repeated keys. It reports false
// when n is not a mapping.
func (d *yamlDoc) fields(n *yaml.Node, path string, fs []yamlField) bool {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return d.walk(n, path, func(k, v *yaml.Node) {
		i := slices.Index(names, k.Value)
		if i < 0 {
			if near := yamlClosest(k.Value, names); near != "" {
				if d.misspelt == nil {
					d.misspelt = map[string]bool{}
				}
				d.misspelt[yamlJoin(path, near)] = true
			}
			d.add(k.Line, fmt.Sprintf("unknown key %q %s", k.Value, yamlWhere(path)),
				"known keys: "+strings.Join(names, ", ")+yamlDidYouMean(k.Value, names))
			return
		}
		fs[i].fn(k, v)
	})
}

// walk hands each key of the mapping n and its value to fn, reporting keys that are not plain names and
// keys written twice.
func (d *yamlDoc) walk(n *yaml.Node, path string, fn func(k, v *yaml.Node)) bool {
	if !d.isKind(n, yaml.MappingNode, path) {
		return false
	}
	n = yamlDeref(n)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), yamlDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, fmt.Sprintf("a key %s is %s", yamlWhere(path), yamlDescribe(k)), "write plain names as keys")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, fmt.Sprintf("key %q appears twice %s (first at line %d)", k.Value, yamlWhere(path), first), "keep one of them")
			continue
		}
		seen[k.Value] = k.Line
		fn(k, v)
	}
	return true
}

// missing reports that the key at path (dotted) is missing, unless the file wrote a misspelling of it,
// which has been reported already.
func (d *yamlDoc) missing(line int, path, msg, fix string) {
	if !d.misspelt[path] {
		d.add(line, msg, fix)
	}
}

func yamlJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func yamlWhere(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

func yamlLastKey(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

// isKind reports whether n is of kind want, recording a type error naming path when it is not.
func (d *yamlDoc) isKind(n *yaml.Node, want yaml.Kind, path string) bool {
	n = yamlDeref(n)
	if n.Kind == want && !yamlIsNull(n) {
		return true
	}
	name := path
	if name == "" {
		name = "the file"
	}
	if yamlIsNull(n) {
		d.add(n.Line, name+" has no value", "give it a value, or remove the key")
		return false
	}
	key := yamlLastKey(path)
	switch want {
	case yaml.MappingNode:
		d.add(n.Line, fmt.Sprintf("%s must be a mapping of keys, not %s", name, yamlDescribe(n)),
			fmt.Sprintf("write its keys indented under %s:, or as %s: {key: value}", key, key))
	case yaml.SequenceNode:
		d.add(n.Line, fmt.Sprintf("%s must be a list, not %s", name, yamlDescribe(n)),
			fmt.Sprintf("write %s: [a, b], or one \"- item\" line per entry", key))
	case yaml.ScalarNode:
		d.add(n.Line, fmt.Sprintf("%s must be a single value, not %s", name, yamlDescribe(n)),
			fmt.Sprintf("write the value on the same line, such as %s: value (quote text that holds \": \")", key))
	}
	return false
}

// text reads a scalar as text. Numbers and booleans are taken as written.
func (d *yamlDoc) text(v *yaml.Node, path string) (string, bool) {
	if !d.isKind(v, yaml.ScalarNode, path) {
		return "", false
	}
	return yamlDeref(v).Value, true
}

// texts reads a list of scalars.
func (d *yamlDoc) texts(v *yaml.Node, path string) ([]string, bool) {
	if !d.isKind(v, yaml.SequenceNode, path) {
		return nil, false
	}
	v = yamlDeref(v)
	out := make([]string, 0, len(v.Content))
	ok := true
	for i, item := range v.Content {
		item = yamlDeref(item)
		if item.Kind != yaml.ScalarNode || yamlIsNull(item) {
			d.add(item.Line, fmt.Sprintf("%s[%d] must be a single value, not %s", path, i, yamlDescribe(item)),
				fmt.Sprintf("write each entry of %s as plain text, such as %s: [a, b]", yamlLastKey(path), yamlLastKey(path)))
			ok = false
			continue
		}
		out = append(out, item.Value)
	}
	return out, ok
}

// count reads a whole number of 0 or more.
func (d *yamlDoc) count(v *yaml.Node, path string) (int64, bool) {
	if !d.isKind(v, yaml.ScalarNode, path) {
		return 0, false
	}
	v = yamlDeref(v)
	key := yamlLastKey(path)
	n, err := strconv.ParseInt(v.Value, 10, 64)
	switch {
	case v.ShortTag() == "!!str" && err == nil:
		d.add(v.Line, fmt.Sprintf("%s must be a whole number, not the quoted text %q", path, v.Value),
			fmt.Sprintf("remove the quotes: %s: %s", key, v.Value))
	case v.ShortTag() != "!!int" || err != nil:
		d.add(v.Line, fmt.Sprintf("%s must be a whole number, not %s", path, yamlDescribe(v)),
			fmt.Sprintf("write a whole number, such as %s: 1", key))
	case n < 0:
		d.add(v.Line, fmt.Sprintf("%s must be 0 or more, not %d", path, n),
			fmt.Sprintf("write a whole number of 0 or more, such as %s: 1", key))
	default:
		return n, true
	}
	return 0, false
}

// countInt reads a whole number of 0 or more that fits an int32.
func (d *yamlDoc) countInt(v *yaml.Node, path string) (int, bool) {
	n, ok := d.count(v, path)
	if ok && n > math.MaxInt32 {
		d.add(yamlDeref(v).Line, fmt.Sprintf("%s is too large: %d", path, n), fmt.Sprintf("write at most %d", math.MaxInt32))
		return 0, false
	}
	return int(n), ok
}

// enum reads one of the given values.
func (d *yamlDoc) enum(v *yaml.Node, path string, values ...string) (string, bool) {
	s, ok := d.text(v, path)
	if !ok {
		return "", false
	}
	if slices.Contains(values, s) {
		return s, true
	}
	key := yamlLastKey(path)
	alts := make([]string, len(values))
	for i, val := range values {
		alts[i] = key + ": " + val
	}
	fix := "write " + alts[0]
	if len(alts) > 1 {
		fix = "write " + strings.Join(alts[:len(alts)-1], ", ") + " or " + alts[len(alts)-1]
	}
	d.add(yamlDeref(v).Line, fmt.Sprintf("%s %q is not one of %s", path, s, strings.Join(values, ", ")), fix+yamlDidYouMean(s, values))
	return "", false
}

func yamlDeref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func yamlIsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// yamlItemLine returns the line of the i-th entry of the sequence v.
func yamlItemLine(v *yaml.Node, i int) int {
	v = yamlDeref(v)
	if v != nil && i < len(v.Content) {
		return v.Content[i].Line
	}
	if v != nil {
		return v.Line
	}
	return 0
}

// yamlDescribe names what a node holds, for "must be X, not Y" messages; it never dumps Go types.
func yamlDescribe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	if yamlIsNull(n) {
		return "an empty value"
	}
	s := n.Value
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}

// yamlDidYouMean returns `; did you mean "X"?` for the option nearest to got, or "" when none is close.
func yamlDidYouMean(got string, options []string) string {
	if best := yamlClosest(got, options); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// yamlClosest returns the first of options nearest to got within edit distance 2, other than got itself.
func yamlClosest(got string, options []string) string {
	best, bestDist := "", 3
	for _, o := range options {
		if dist := levenshtein.ComputeDistance(got, o); dist < bestDist && o != got {
			best, bestDist = o, dist
		}
	}
	return best
}
