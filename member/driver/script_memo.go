package driver

import "sync"

// scriptRules is every LoadScript's memo of the rules ParseScript made of a script's text, in this
// process.
var scriptRules = &scriptMemo{rules: map[string][]ScriptRule{}}

// scriptMemoMax bounds the text scriptMemo keeps the rules of, in bytes.
const scriptMemoMax = 1 << 20

// scriptMemo keeps the compiled rules of each script text that parsed. mur run's staging and each
// member's start both build the member's drivers, and a formation's members often play one script
// (a thousand members, a thousand copies of the same script.yaml): each text is parsed and compiled
// once a process. Rules are immutable and hold nothing of the file they came from (the Script, which
// each load makes anew, holds the path), so scripts of the same text share them. A text that does not
// parse is parsed again each time, so every load reports its own file's errors; past scriptMemoMax bytes
// of text the memo keeps nothing more.
type scriptMemo struct {
	mu    sync.Mutex // guards bytes and rules
	bytes int
	rules map[string][]ScriptRule // by the script's text; never modified once stored
}

// parse returns ParseScript(path, data), with the rules from the memo when it holds data's.
func (m *scriptMemo) parse(path string, data []byte) (*Script, error) {
	m.mu.Lock()
	rules, ok := m.rules[string(data)]
	m.mu.Unlock()
	if ok {
		return &Script{Path: path, Rules: rules}, nil
	}
	s, err := ParseScript(path, data)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rules[string(data)]; !ok && m.bytes+len(data) <= scriptMemoMax {
		m.rules[string(data)] = s.Rules
		m.bytes += len(data)
	}
	return s, nil
}
