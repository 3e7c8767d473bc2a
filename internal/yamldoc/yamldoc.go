package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"
)

// Error is one problem in a YAML file: where it is, what is wrong, and what to write instead.
type Error struct {
	File string
	Line int // 0 when the problem concerns the whole file
	Msg  string
	Fix  string
}

// Error formats e as FILE:LINE: MSG; FIX (see Format).
func (e *Error) Error() string { return Format(e.File, e.Line, e.Msg, e.Fix) }

// Format writes FILE:LINE: MSG; FIX, leaving out the line when it is 0 and the fix when it is empty.
func Format(file string, line int, msg, fix string) string {
	var b strings.Builder
	b.WriteString(file)
	if line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(line))
	}
	b.WriteString(": ")
	b.WriteString(msg)
	if fix != "" {
		b.WriteString("; ")
		b.WriteString(fix)
	}
	return b.String()
}

// Doc collects the problems of one file. The zero value with File set is ready; the other fields are
// optional.
type Doc struct {
	File string
	// Mk builds the error of one problem; nil makes an *Error naming File.
	Mk func(line int, msg, fix string) error
	// Lines, when not nil, receives the line of every key Walk passes, by its dotted path.
	Lines map[string]int
	// Misplaced names the block a key belongs to when it is written at the top level instead.
	Misplaced map[string]string
	// WholeFix is the fix for a count that is not a whole number or is below 0, with %s for its key.
	// Empty: "write a whole number, such as KEY: 1" (and "... of 0 or more ..." below 0).
	WholeFix string

	errs     []lineErr
	misspelt map[string]bool // dotted key paths an unknown key was taken to misspell
}

type lineErr struct {
	line int
	err  error
}

// Field is one known key of a mapping and what to do with its value.
type Field struct {
	Name string
	Fn   func(k, v *yaml.Node)
}

// Add records a problem at line.
func (d *Doc) Add(line int, msg, fix string) {
	if d.Mk != nil {
		d.AddErr(line, d.Mk(line, msg, fix))
		return
	}
	d.AddErr(line, &Error{File: d.File, Line: line, Msg: msg, Fix: fix})
}

// AddErr records a problem the caller built, such as an *Error wrapped with a sentinel.
func (d *Doc) AddErr(line int, err error) {
	d.errs = append(d.errs, lineErr{line, err})
}

// Err returns every problem in line order, joined; nil when there is none.
func (d *Doc) Err() error {
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

var lineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// MaxExpandedNodes bounds the values a file may hold once its aliases are expanded, so that a few
// nested aliases cannot make the decoder walk billions of nodes.
const MaxExpandedNodes = 100_000

// Root parses data and returns its top-level mapping, or nil after recording why there is none. example
// is what a right file starts with, for the fix.
func (d *Doc) Root(data []byte, example string) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
			line = ProblemLine(data, line)
		}
		d.Add(line, "not valid YAML: "+msg,
			"fix the syntax there: indent with spaces only, and quote text that holds \": \" or starts with one of {[*&!|>%@'\"")
		return nil
	}
	if len(doc.Content) == 0 || IsNull(Deref(doc.Content[0])) {
		d.Add(1, "the file is empty", "write "+example)
		return nil
	}
	if ExpandedSize(doc.Content[0], map[*yaml.Node]int{}) > MaxExpandedNodes {
		d.Add(1, fmt.Sprintf("the file expands to more than %d values through its aliases", MaxExpandedNodes),
			"write the values out instead of nesting *aliases")
		return nil
	}
	n := Deref(doc.Content[0])
	if n.Kind != yaml.MappingNode {
		d.Add(n.Line, "the file must be a mapping of keys, not "+Describe(n), "write "+example)
		return nil
	}
	return n
}

// LastLine returns the number of the last line of data as YAML counts lines: it breaks them at \n, \r,
// \r\n, NEL, LS and PS, and a break that ends the file starts no line.
func LastLine(data []byte) int {
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

// ProblemLine narrows down where a syntax error is. yaml.v3 names the line where the enclosing block
// starts (its "context"), which can be far above the mistake, so this finds the shortest run of the
// file's lines from there on that already fails to parse: its last line is where the mistake is. A
// prefix ends no block early that the mistake's own block did not, so the answer is never above the
// decoder's. When the block left open at the end of the file began on its first line, yaml.v3 has no
// context line and names the line after the file's end instead; the search then starts at the top. Every
// document of a multi-document stream is decoded.
func ProblemLine(data []byte, reported int) int {
	last := LastLine(data)
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
		if decodeAll(bytes.Join(lines[:k], nil)) != nil {
			return k
		}
	}
	return reported
}

// decodeAll decodes every document of data, returning the first error.
func decodeAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ExpandedSize counts the values under n with every alias expanded, each shared node counted once per
// use but computed once.
func ExpandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = MaxExpandedNodes + 1 // an alias cycle counts as too large
	size := 1
	if n.Kind == yaml.AliasNode {
		size = ExpandedSize(n.Alias, memo)
	}
	for _, c := range n.Content {
		size += ExpandedSize(c, memo)
		if size > MaxExpandedNodes {
			break
		}
	}
	memo[n] = size
	return size
}

// Fields walks the mapping n, the value of path ("" for the top level), handing each known key's value
// to its field; it reports unknown keys (with the nearest known one, or the block a misplaced top-level
// key belongs to) and repeated keys. It reports false when n is not a mapping.
func (d *Doc) Fields(n *yaml.Node, path string, fs []Field) bool {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return d.Walk(n, path, func(k, v *yaml.Node) {
		i := slices.Index(names, k.Value)
		if i < 0 {
			msg := fmt.Sprintf("unknown key %q %s", k.Value, Where(path))
			if block, ok := d.Misplaced[k.Value]; ok && path == "" {
				d.Add(k.Line, msg, fmt.Sprintf("%s belongs under %s:; move it there, as %s.%s", k.Value, block, block, k.Value))
				return
			}
			if near := Closest(k.Value, names); near != "" {
				if d.misspelt == nil {
					d.misspelt = map[string]bool{}
				}
				d.misspelt[Join(path, near)] = true
			}
			d.Add(k.Line, msg, "known keys: "+strings.Join(names, ", ")+DidYouMean(k.Value, names))
			return
		}
		fs[i].Fn(k, v)
	})
}

// Walk hands each key of the mapping n (whose keys may be names the file chooses) and its value to fn,
// reporting keys that are not plain names and keys written twice. It reports false when n is not a
// mapping.
func (d *Doc) Walk(n *yaml.Node, path string, fn func(k, v *yaml.Node)) bool {
	if !d.IsKind(n, yaml.MappingNode, path) {
		return false
	}
	n = Deref(n)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), Deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.Add(k.Line, fmt.Sprintf("a key %s is %s", Where(path), Describe(k)), "write plain names as keys")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.Add(k.Line, fmt.Sprintf("key %q appears twice %s (first at line %d)", k.Value, Where(path), first), "keep one of them")
			continue
		}
		seen[k.Value] = k.Line
		if d.Lines != nil {
			d.Lines[Join(path, k.Value)] = k.Line
		}
		fn(k, v)
	}
	return true
}

// Missing reports that the key at path (dotted) is missing, unless the file wrote a misspelling of it,
// which has been reported already.
func (d *Doc) Missing(line int, path, msg, fix string) {
	if !d.misspelt[path] {
		d.Add(line, msg, fix)
	}
}

// Join returns the dotted path of key inside path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Where says where the mapping at path is, for messages: "at the top level" or "in PATH".
func Where(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

// LastKey returns the last key of a dotted path.
func LastKey(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

// IsKind reports whether n is of kind want, recording a type error naming path when it is not.
func (d *Doc) IsKind(n *yaml.Node, want yaml.Kind, path string) bool {
	n = Deref(n)
	if n.Kind == want && !IsNull(n) {
		return true
	}
	name := path
	if name == "" {
		name = "the file"
	}
	if IsNull(n) {
		d.Add(n.Line, name+" has no value", "give it a value, or remove the key")
		return false
	}
	key := LastKey(path)
	switch want {
	case yaml.MappingNode:
		d.Add(n.Line, fmt.Sprintf("%s must be a mapping of keys, not %s", name, Describe(n)),
			fmt.Sprintf("write its keys indented under %s:, or as %s: {key: value}", key, key))
	case yaml.SequenceNode:
		d.Add(n.Line, fmt.Sprintf("%s must be a list, not %s", name, Describe(n)),
			fmt.Sprintf("write %s: [a, b], or one \"- item\" line per entry", key))
	case yaml.ScalarNode:
		d.Add(n.Line, fmt.Sprintf("%s must be a single value, not %s", name, Describe(n)),
			fmt.Sprintf("write the value on the same line, such as %s: value (quote text that holds \": \")", key))
	}
	return false
}

// Text reads a scalar as text. Numbers and booleans are taken as written.
func (d *Doc) Text(v *yaml.Node, path string) (string, bool) {
	if !d.IsKind(v, yaml.ScalarNode, path) {
		return "", false
	}
	return Deref(v).Value, true
}

// Texts reads a list of scalars.
func (d *Doc) Texts(v *yaml.Node, path string) ([]string, bool) {
	if !d.IsKind(v, yaml.SequenceNode, path) {
		return nil, false
	}
	v = Deref(v)
	out := make([]string, 0, len(v.Content))
	ok := true
	for i, item := range v.Content {
		item = Deref(item)
		if item.Kind != yaml.ScalarNode || IsNull(item) {
			d.Add(item.Line, fmt.Sprintf("%s[%d] must be a single value, not %s", path, i, Describe(item)),
				fmt.Sprintf("write each entry of %s as plain text, such as %s: [a, b]", LastKey(path), LastKey(path)))
			ok = false
			continue
		}
		out = append(out, item.Value)
	}
	return out, ok
}

// Count reads a whole number of 0 or more.
func (d *Doc) Count(v *yaml.Node, path string) (int64, bool) {
	if !d.IsKind(v, yaml.ScalarNode, path) {
		return 0, false
	}
	v = Deref(v)
	key := LastKey(path)
	notWhole, negative := "write a whole number, such as %s: 1", "write a whole number of 0 or more, such as %s: 1"
	if d.WholeFix != "" {
		notWhole, negative = d.WholeFix, d.WholeFix
	}
	n, err := strconv.ParseInt(v.Value, 0, 64)
	switch {
	case v.ShortTag() == "!!str" && err == nil:
		d.Add(v.Line, fmt.Sprintf("%s must be a whole number, not the quoted text %q", path, v.Value),
			fmt.Sprintf("remove the quotes: %s: %s", key, v.Value))
	case v.ShortTag() != "!!int" || err != nil:
		d.Add(v.Line, fmt.Sprintf("%s must be a whole number, not %s", path, Describe(v)), fmt.Sprintf(notWhole, key))
	case n < 0:
		d.Add(v.Line, fmt.Sprintf("%s must be 0 or more, not %d", path, n), fmt.Sprintf(negative, key))
	default:
		return n, true
	}
	return 0, false
}

// CountInt reads a whole number of 0 or more that fits an int32.
func (d *Doc) CountInt(v *yaml.Node, path string) (int, bool) {
	n, ok := d.Count(v, path)
	if ok && n > math.MaxInt32 {
		d.Add(Deref(v).Line, fmt.Sprintf("%s is too large: %d", path, n), fmt.Sprintf("write at most %d", math.MaxInt32))
		return 0, false
	}
	return int(n), ok
}

// CountOr0 is CountInt, with 0 for a value in error.
func (d *Doc) CountOr0(v *yaml.Node, path string) int {
	n, _ := d.CountInt(v, path)
	return n
}

// Number reads a number, whole or not.
func (d *Doc) Number(v *yaml.Node, path string) (float64, bool) {
	if !d.IsKind(v, yaml.ScalarNode, path) {
		return 0, false
	}
	v = Deref(v)
	f, err := strconv.ParseFloat(v.Value, 64)
	tag := v.ShortTag()
	switch {
	case tag == "!!str" && err == nil:
		d.Add(v.Line, fmt.Sprintf("%s must be a number, not the quoted text %q", path, v.Value),
			fmt.Sprintf("remove the quotes: %s: %s", LastKey(path), v.Value))
	case (tag != "!!int" && tag != "!!float") || err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		d.Add(v.Line, fmt.Sprintf("%s must be a number, not %s", path, Describe(v)),
			fmt.Sprintf("write a number, such as %s: 0.8", LastKey(path)))
	default:
		return f, true
	}
	return 0, false
}

// Flag reads true or false.
func (d *Doc) Flag(v *yaml.Node, path string) (bool, bool) {
	if !d.IsKind(v, yaml.ScalarNode, path) {
		return false, false
	}
	v = Deref(v)
	b, err := strconv.ParseBool(v.Value)
	if v.ShortTag() != "!!bool" || err != nil {
		d.Add(v.Line, fmt.Sprintf("%s must be true or false, not %s", path, Describe(v)),
			fmt.Sprintf("write %s: true or %s: false", LastKey(path), LastKey(path)))
		return false, false
	}
	return b, true
}

// Enum reads one of the given values.
func (d *Doc) Enum(v *yaml.Node, path string, values ...string) (string, bool) {
	s, ok := d.Text(v, path)
	if !ok {
		return "", false
	}
	if slices.Contains(values, s) {
		return s, true
	}
	key := LastKey(path)
	alts := make([]string, len(values))
	for i, val := range values {
		alts[i] = key + ": " + val
	}
	fix := "write " + alts[0]
	if len(alts) > 1 {
		fix = "write " + strings.Join(alts[:len(alts)-1], ", ") + " or " + alts[len(alts)-1]
	}
	d.Add(Deref(v).Line, fmt.Sprintf("%s %q is not one of %s", path, s, strings.Join(values, ", ")), fix+DidYouMean(s, values))
	return "", false
}

// Deref follows aliases to the node they name.
func Deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is an empty value (~, null or nothing).
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// IsMapping reports whether n is (an alias of) a mapping.
func IsMapping(n *yaml.Node) bool {
	n = Deref(n)
	return n != nil && n.Kind == yaml.MappingNode
}

// IsSeq reports whether n is (an alias of) a list.
func IsSeq(n *yaml.Node) bool { n = Deref(n); return n != nil && n.Kind == yaml.SequenceNode }

// ItemLine returns the line of the i-th entry of the sequence v.
func ItemLine(v *yaml.Node, i int) int {
	v = Deref(v)
	if v != nil && i < len(v.Content) {
		return v.Content[i].Line
	}
	if v != nil {
		return v.Line
	}
	return 0
}

// Describe names what a node holds, for "must be X, not Y" messages; it never dumps Go types.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	if IsNull(n) {
		return "an empty value"
	}
	s := n.Value
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}

// DidYouMean returns `; did you mean "X"?` for the Closest of options to got, or "" when none is close.
func DidYouMean(got string, options []string) string {
	if best := Closest(got, options); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// Closest returns the first of options nearest to got within edit distance 2, other than got itself;
// "" when none is that close.
func Closest(got string, options []string) string {
	best, bestDist := "", 3
	for _, o := range options {
		if dist := levenshtein.ComputeDistance(got, o); dist < bestDist && o != got {
			best, bestDist = o, dist
		}
	}
	return best
}
