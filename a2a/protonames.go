package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// JSONNames returns params with every field named by its proto field name (snake_case, as in a2a.proto)
// renamed to its lowerCamelCase JSON name, which is what this package's types decode. A2A's JSON-RPC
// binding is ProtoJSON, whose parsers accept both spellings, and real clients send either
// (task_id, history_length, page_size, ...).
//
// The rule is protoc's json_name rule, applied to every object key: each underscore is dropped and the
// letter after it upper-cased. Keys below the free-form fields (metadata and a data part's data, which
// are google.protobuf.Struct values) are the sender's own and kept as they are. An object that gives a
// field under both spellings with different values is refused with an invalid params error naming both;
// with equal values, one is kept. params without a snake_case key are returned as they are, without a
// copy.
func JSONNames(params []byte) ([]byte, error) {
	s := nameScan{b: params}
	if !s.value(false) {
		return params, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return params, nil // not JSON: the strict decode that follows says so
	}
	v, err := renameKeys(v, "", false)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// freeForm reports whether the field named name holds the sender's own JSON, whose keys are not renamed.
func freeForm(name string) bool { return name == "metadata" || name == "data" }

// JSONName is the lowerCamelCase JSON name of the proto field name: protoc's json_name rule.
func JSONName(name string) string {
	if !strings.Contains(name, "_") {
		return name
	}
	var b strings.Builder
	up := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

// renameKeys renames the keys of v's objects (see JSONNames); path is where v is, for errors.
func renameKeys(v any, path string, free bool) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if free {
			return x, nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // so that the same request always gets the same error
		out := make(map[string]any, len(x))
		from := make(map[string]string, len(x))
		for _, k := range keys {
			name := JSONName(k)
			val, err := renameKeys(x[k], join(path, name), freeForm(name))
			if err != nil {
				return nil, err
			}
			if prev, ok := from[name]; ok {
				if !reflect.DeepEqual(out[name], val) {
					return nil, InvalidParams(FieldViolation{Field: join(path, name), Description: fmt.Sprintf(
						"given twice with different values, as %q and %q (the proto field name and its JSON name name the same field): send one of them",
						CutID(prev), CutID(k))})
				}
				continue
			}
			out[name], from[name] = val, k
		}
		return out, nil
	case []any:
		for i, e := range x {
			r, err := renameKeys(e, fmt.Sprintf("%s[%d]", path, i), free)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
		return x, nil
	}
	return v, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// nameScan walks JSON without decoding it, to tell whether any key outside the free-form fields has an
// underscore: most requests have none and are decoded as they came. A malformed input reports true, so
// that the full decode judges it.
type nameScan struct {
	b []byte
	i int
}

func (s *nameScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// str skips a string starting at s.i and returns its raw bytes (escapes kept), or ok false.
func (s *nameScan) str() (raw []byte, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			j++
		case '"':
			s.i = j + 1
			return s.b[start:j], true
		}
	}
	return nil, false
}

// value skips one value and reports whether a key to rename (or something malformed) is in it.
func (s *nameScan) value(free bool) bool {
	s.ws()
	if s.i >= len(s.b) {
		return true
	}
	switch s.b[s.i] {
	case '{':
		s.i++
		for {
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == '}' {
				s.i++
				return false
			}
			key, ok := s.str()
			if !ok {
				return true
			}
			if !free && (bytes.IndexByte(key, '_') >= 0 || bytes.IndexByte(key, '\\') >= 0) {
				return true
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return true
			}
			s.i++
			if s.value(free || freeForm(string(key))) {
				return true
			}
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.i < len(s.b) && s.b[s.i] == '}' {
				s.i++
				return false
			}
			return true
		}
	case '[':
		s.i++
		for {
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ']' {
				s.i++
				return false
			}
			if s.value(free) {
				return true
			}
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.i < len(s.b) && s.b[s.i] == ']' {
				s.i++
				return false
			}
			return true
		}
	case '"':
		_, ok := s.str()
		return !ok
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return false
		}
		s.i++
	}
	return false
}
