package policy

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FileEditor changes the text of one policy file in place: a rule or test
// table, a policy-level key, a new table appended. Only the bytes of what
// changes are rewritten; comments, key order, quoting and every other
// table stay as the person wrote them. It is how an experiment committed
// through the API becomes a commit people can read (docs/git.md).
type FileEditor struct {
	src   []byte
	lay   *layout
	names map[string][]string // "rules"/"tests" → element names, in order
	edits []textEdit
	count map[string]int // entries of each array after the edits
}

// textEdit replaces src[start:end] with text; seq keeps the order of
// insertions at one place.
type textEdit struct {
	start, end, seq int
	text            string
}

// ErrNotEditable means a table cannot be changed in place: it is written
// as an inline array (`rules = [{…}]`), or the file's text could not be
// mapped to its tables.
var ErrNotEditable = errors.New("policy: this table cannot be edited in place")

// NewFileEditor reads a policy file's text, which must parse.
func NewFileEditor(data []byte) (*FileEditor, error) {
	if _, msg := checkBudget(data); msg != "" {
		return nil, fmt.Errorf("policy: %s", msg)
	}
	doc, err := parseTOML(data)
	if err != nil {
		return nil, fmt.Errorf("policy: invalid TOML: %w", err)
	}
	f := &FileEditor{src: data, lay: scanLayout(data), names: map[string][]string{}, count: map[string]int{}}
	for array := range elementArrays {
		for _, el := range tables(doc[array]) {
			name, _ := el["name"].(string)
			f.names[array] = append(f.names[array], name)
		}
		f.count[array] = len(f.names[array])
	}
	return f, nil
}

// tables are the tables of an array of tables, written either way.
func tables(v any) []map[string]any {
	switch x := v.(type) {
	case []map[string]any:
		return x
	case []any:
		out := make([]map[string]any, 0, len(x))
		for _, el := range x {
			m, _ := el.(map[string]any)
			out = append(out, m)
		}
		return out
	}
	return nil
}

// Has reports whether the file defines the rule (array "rules") or test
// ("tests") called name.
func (f *FileEditor) Has(array, name string) bool { return slices.Contains(f.names[array], name) }

// Empty reports whether the file, edits included, holds no rule or test.
func (f *FileEditor) Empty() bool { return f.count["rules"] == 0 && f.count["tests"] == 0 }

// entry finds the element called name, if it can be edited in place.
func (f *FileEditor) entry(array, name string) (*element, error) {
	i := slices.Index(f.names[array], name)
	es := f.lay.elems[array]
	if i < 0 {
		return nil, fmt.Errorf("policy: no %s %q in this file", array[:len(array)-1], name)
	}
	if len(es) != len(f.names[array]) || es[i].inline {
		return nil, fmt.Errorf("%w: %s %q", ErrNotEditable, array[:len(array)-1], name)
	}
	return es[i], nil
}

// eol is the offset just past the end of the line holding off.
func (f *FileEditor) eol(off int) int {
	if i := bytes.IndexByte(f.src[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(f.src)
}

func (f *FileEditor) add(start, end int, text string) {
	f.edits = append(f.edits, textEdit{start: start, end: end, seq: len(f.edits), text: text})
}

// line is text as a line ending at offset at: a file whose last line has
// no newline gets one first.
func (f *FileEditor) line(at int, text string) string {
	if at == len(f.src) && at > 0 && f.src[at-1] != '\n' {
		return "\n" + text
	}
	return text
}

// keyEdit is the new `key = value` line(s) of one key of a table ("" to
// remove the key).
type keyEdit struct{ key, text string }

// SetRule rewrites, in the rule table called old.Name, the keys whose
// values differ between old (the rule as this file gives it) and r.
func (f *FileEditor) SetRule(old, r Rule) error {
	e, err := f.entry("rules", old.Name)
	if err != nil {
		return err
	}
	var edits []keyEdit
	one := func(key string, changed bool, write func(w *tomlWriter)) {
		if changed {
			var w tomlWriter
			write(&w)
			edits = append(edits, keyEdit{key, w.buf.String()})
		}
	}
	one("name", old.Name != r.Name, func(w *tomlWriter) { w.str("name", r.Name, false) })
	one("priority", old.Priority != r.Priority, func(w *tomlWriter) { w.line("priority", strconv.FormatInt(r.Priority, 10)) })
	one("action", old.Action != r.Action, func(w *tomlWriter) { w.str("action", string(r.Action), false) })
	one("description", old.Description != r.Description, func(w *tomlWriter) {
		w.text("description", r.Description, true, f.multiline(e, "description"))
	})
	one("match", old.Match != r.Match, func(w *tomlWriter) { w.text("match", r.Match, false, f.multiline(e, "match")) })
	one("preview", old.Preview != r.Preview, func(w *tomlWriter) {
		if r.Preview {
			w.line("preview", "true")
		}
	})
	return f.setKeys(e, edits, func() (string, error) { return ruleTable(r, f.multiline(e, "match")), nil })
}

// SetTest is SetRule for the test called old.Name.
func (f *FileEditor) SetTest(old, t Test) error {
	e, err := f.entry("tests", old.Name)
	if err != nil {
		return err
	}
	newReq, err := inlineValue(normalizeMap(t.Request))
	if err != nil {
		return fmt.Errorf("policy: test %q: request: %w", t.Name, err)
	}
	var edits []keyEdit
	one := func(key string, changed bool, text string) {
		if changed {
			edits = append(edits, keyEdit{key, text})
		}
	}
	var w tomlWriter
	w.str("name", t.Name, false)
	one("name", old.Name != t.Name, w.buf.String())
	one("request", !bytes.Equal(requestJSON(old), requestJSON(t)), "request = "+newReq+"\n")
	w.buf.Reset()
	w.str("expect", string(t.Expect), false)
	one("expect", old.Expect != t.Expect, w.buf.String())
	w.buf.Reset()
	if t.Rule != nil {
		w.str("rule", *t.Rule, false)
	}
	one("rule", (old.Rule == nil) != (t.Rule == nil) || old.Rule != nil && *old.Rule != *t.Rule, w.buf.String())
	return f.setKeys(e, edits, func() (string, error) { return testTable(t) })
}

// setKeys applies edits to e key by key; when a key to change is not
// written as one `key = value` (a sub-table, dotted keys), the whole table
// is written again instead, as table gives it.
func (f *FileEditor) setKeys(e *element, edits []keyEdit, table func() (string, error)) error {
	for _, k := range edits {
		if e.complex[k.key] {
			text, err := table()
			if err != nil {
				return err
			}
			f.add(e.start, f.eol(e.end), text)
			return nil
		}
	}
	for _, k := range edits {
		f.setKey(e, k.key, k.text)
	}
	return nil
}

// multiline reports whether e's key is written over several lines (a
// multi-line string), so that its new value keeps that style.
func (f *FileEditor) multiline(e *element, key string) bool {
	sp, ok := e.spans[key]
	return ok && bytes.ContainsRune(f.src[sp.start:sp.end], '\n')
}

// setKey replaces the `key = value` line(s) of e with text ("" removes
// them), or adds text at the end of e when e has no such key.
func (f *FileEditor) setKey(e *element, key, text string) {
	if sp, ok := e.spans[key]; ok {
		f.add(sp.start, f.eol(sp.end), text)
		return
	}
	if text != "" {
		at := f.eol(e.direct) // before any sub-table of the element
		f.add(at, at, f.line(at, text))
	}
}

// Remove deletes the table called name, with the comment lines right
// above its header and one blank line before them.
func (f *FileEditor) Remove(array, name string) error {
	e, err := f.entry(array, name)
	if err != nil {
		return err
	}
	start := e.start
	for start > 0 {
		prev := bytes.LastIndexByte(f.src[:start-1], '\n') + 1
		if t := bytes.TrimSpace(f.src[prev : start-1]); len(t) == 0 || t[0] != '#' {
			break
		}
		start = prev
	}
	if start >= 2 && f.src[start-1] == '\n' && f.src[start-2] == '\n' {
		start-- // the blank line that separated it from what came before
	}
	f.add(start, f.eol(e.end), "")
	f.count[array]--
	return nil
}

// AppendRule adds r after the file's last rule table (at the end of the
// file when it has none), written as MarshalTOML writes rules.
// Its match is written over several lines when the file's last rule's is.
func (f *FileEditor) AppendRule(r Rule) {
	multi := false
	if es := f.lay.elems["rules"]; len(es) > 0 {
		multi = f.multiline(es[len(es)-1], "match")
	}
	f.appendTable("rules", ruleTable(r, multi))
}

// ruleTable is r as a [[rules]] table, keys in the order people write
// them in the examples; with multi, its match over several lines.
func ruleTable(r Rule, multi bool) string {
	var w tomlWriter
	w.buf.WriteString("[[rules]]\n")
	w.str("name", r.Name, false)
	w.line("priority", strconv.FormatInt(r.Priority, 10))
	w.str("action", string(r.Action), false)
	w.text("description", r.Description, true, false)
	w.text("match", r.Match, false, multi)
	if r.Preview {
		w.line("preview", "true")
	}
	return w.buf.String()
}

// AppendTest adds t after the file's last test table (at the end of the
// file when it has none).
func (f *FileEditor) AppendTest(t Test) error {
	table, err := testTable(t)
	if err != nil {
		return err
	}
	f.appendTable("tests", table)
	return nil
}

// testTable is t as a [[tests]] table, its request inline.
func testTable(t Test) (string, error) {
	req, err := inlineValue(normalizeMap(t.Request))
	if err != nil {
		return "", fmt.Errorf("policy: test %q: request: %w", t.Name, err)
	}
	var w tomlWriter
	w.buf.WriteString("[[tests]]\n")
	w.str("name", t.Name, false)
	w.line("request", req)
	w.str("expect", string(t.Expect), false)
	if t.Rule != nil {
		w.str("rule", *t.Rule, false)
	}
	return w.buf.String(), nil
}

func (f *FileEditor) appendTable(array, table string) {
	at := len(f.src)
	if es := f.lay.elems[array]; len(es) > 0 && !es[len(es)-1].inline && len(es) == len(f.names[array]) {
		at = f.eol(es[len(es)-1].end)
	}
	f.add(at, at, f.line(at, "\n"+table))
	f.count[array]++
}

// SetSetting sets a policy-level string key (description, default_action,
// group, on_error) written before the first table; "" removes it.
func (f *FileEditor) SetSetting(key, value string) {
	var w tomlWriter
	w.str(key, value, true)
	if sp, ok := f.lay.topSpans[key]; ok {
		f.add(sp.start, f.eol(sp.end), w.buf.String())
		return
	}
	if value == "" {
		return
	}
	at := -1 // after the last key before the first table
	for _, sp := range f.lay.topSpans {
		if end := f.eol(sp.end); f.lay.firstHeader < 0 || end <= f.lay.firstHeader {
			at = max(at, end)
		}
	}
	if at < 0 {
		at = f.lay.firstHeader
	}
	if at < 0 {
		at = len(f.src)
	}
	f.add(at, at, f.line(at, w.buf.String()))
}

// Bytes is the text with every edit applied.
func (f *FileEditor) Bytes() ([]byte, error) {
	edits := slices.Clone(f.edits)
	slices.SortStableFunc(edits, func(a, b textEdit) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if ai, bi := a.start == a.end, b.start == b.end; ai != bi { // an insertion before what starts there
			if ai {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	var out bytes.Buffer
	pos := 0
	for _, e := range edits {
		if e.start < pos {
			return nil, fmt.Errorf("policy: overlapping edits at offset %d", e.start)
		}
		out.Write(f.src[pos:e.start])
		out.WriteString(e.text)
		pos = e.end
	}
	out.Write(f.src[pos:])
	return out.Bytes(), nil
}

// text writes a string that loading trims (match, description): a
// multi-line one ends with a newline, so that its closing quotes sit on a
// line of their own, as people write them; with multi, a one-line value
// is written that way too.
func (w *tomlWriter) text(key, value string, omitEmpty, multi bool) {
	if value != "" && (multi || strings.Contains(value, "\n")) {
		value += "\n" // str opens with quotes and a newline, which TOML drops
	}
	w.str(key, value, omitEmpty)
}

// requestJSON is a test's request in canonical JSON: 443 and 443.0 (JSON
// has one number type) are the same request.
func requestJSON(t Test) []byte {
	return (&Policy{Tests: []Test{{Request: t.Request}}}).Canonical()
}
