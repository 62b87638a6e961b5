package policy

import (
	"bytes"
	"sort"
	"strconv"
)

// BurntSushi/toml v1.6 keeps key positions private: MetaData has Keys,
// IsDefined and Undecoded but no position API, and the lines in its decode
// errors come from a map that each [[rules]] element overwrites. So, once a
// document has parsed, we scan its text again for the few places errors must
// name: top-level keys, and each element of the rules and tests arrays with
// the keys inside it. The scanner only ever sees valid TOML, so it follows
// the grammar loosely; it must not panic and always makes progress.

// elementArrays are the top-level arrays whose elements get positions.
var elementArrays = map[string]bool{"rules": true, "tests": true}

// layout is where things sit in one TOML document. Lines are 1-based.
type layout struct {
	top   map[string]int        // top-level key → line of its first definition
	elems map[string][]*element // "rules"/"tests" → one per element, in order
	// Byte offsets, for editing the text in place (edit.go): the span of
	// each top-level `key = value` (its first definition), and the start
	// of the line of the first table header (-1 when there is none).
	topSpans    map[string]span
	firstHeader int
}

// span is a byte range [start, end) of a document.
type span struct{ start, end int }

// element is one rule or test table: the line of its [[header]] (or of its
// "{" in an inline array) and the lines of the keys inside it.
type element struct {
	line int
	keys map[string]int
	// Byte offsets, for editing in place: start is where the header's
	// line starts, end where the last value of the element (sub-tables
	// included) ends, direct where its last key before any sub-table ends.
	// spans are the `key = value` pieces written directly under the
	// header; complex are keys written any other way (dotted, as a
	// sub-table), which only a rewrite of the element can change.
	start, end int
	direct     int
	inline     bool
	spans      map[string]span
	complex    map[string]bool
}

// topLine returns the line of a top-level key, 0 when unknown.
func (l *layout) topLine(key string) int { return l.top[key] }

// element returns the i-th element of an array. When the scan found fewer
// elements than the parser (`rules = [1, 2]` has no tables to find), the
// array's own line is the best place to point at.
func (l *layout) element(array string, i int) *element {
	if es := l.elems[array]; i >= 0 && i < len(es) {
		return es[i]
	}
	return &element{line: l.top[array], keys: map[string]int{}, inline: true}
}

// keyLine returns the line of a key inside the element, or the element's own.
func (e *element) keyLine(key string) int {
	if n, ok := e.keys[key]; ok {
		return n
	}
	return e.line
}

// scanner walks a TOML document recording a layout.
type scanner struct {
	src   []byte
	i     int
	nl    []int    // offsets of '\n', to turn offsets into lines
	ctx   []string // key of the current [table] or [[array]] header
	lay   *layout
	inArr *element // element opened by the current [[rules]]/[[tests]] header
}

// scanLayout records the layout of a document that has already parsed.
func scanLayout(src []byte) *layout {
	s := &scanner{src: src, lay: &layout{top: map[string]int{}, elems: map[string][]*element{},
		topSpans: map[string]span{}, firstHeader: -1}}
	for i, c := range src {
		if c == '\n' {
			s.nl = append(s.nl, i)
		}
	}
	if bytes.HasPrefix(src, []byte("\uFEFF")) {
		s.i = 3 // a byte-order mark is not part of the first key
	}
	for s.i < len(s.src) {
		start := s.i
		s.skipBlank(true)
		if s.i >= len(s.src) {
			break
		}
		if s.src[s.i] == '[' {
			s.header()
		} else {
			s.keyValue()
		}
		if s.i == start {
			s.i++ // never loop on input the grammar here does not expect
		}
	}
	return s.lay
}

// line returns the 1-based line of a byte offset.
func (s *scanner) line(off int) int {
	return sort.SearchInts(s.nl, off) + 1
}

func (s *scanner) peek(k int) byte {
	if s.i+k < len(s.src) {
		return s.src[s.i+k]
	}
	return 0
}

// skipBlank skips spaces, tabs, comments and, when nl is set, newlines.
func (s *scanner) skipBlank(nl bool) {
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t' || c == '\r':
			s.i++
		case c == '\n' && nl:
			s.i++
		case c == '#':
			for s.i < len(s.src) && s.src[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

// skipLine gives up on the rest of a line the scanner does not understand.
func (s *scanner) skipLine() {
	for s.i < len(s.src) && s.src[s.i] != '\n' {
		s.i++
	}
}

// header handles [table] and [[array]] lines.
func (s *scanner) header() {
	line, start := s.line(s.i), s.lineStart(s.i)
	if s.lay.firstHeader < 0 {
		s.lay.firstHeader = start
	}
	double := s.peek(1) == '['
	s.i++
	if double {
		s.i++
	}
	key := s.key()
	s.skipLine()
	s.ctx = key
	s.inArr = nil
	if len(key) == 0 {
		return
	}
	s.noteTop(key[0], line)
	if double && len(key) == 1 && elementArrays[key[0]] {
		s.inArr = s.newElement(key[0], line)
		s.inArr.start, s.inArr.end, s.inArr.direct = start, s.i, s.i
		return
	}
	s.noteInElement(key, line)
	if e := s.latest(key); e != nil {
		e.complex[key[1]], e.end = true, s.i
	}
}

// lineStart is the offset of the start of the line holding off.
func (s *scanner) lineStart(off int) int {
	return bytes.LastIndexByte(s.src[:off], '\n') + 1
}

// latest is the element a key path (from the document's root) of the
// form rules.x... belongs to: the newest element of that array.
func (s *scanner) latest(full []string) *element {
	if len(full) < 2 || !elementArrays[full[0]] {
		return nil
	}
	es := s.lay.elems[full[0]]
	if len(es) == 0 || es[len(es)-1].inline {
		return nil
	}
	return es[len(es)-1]
}

// keyValue handles `dotted.key = value` in the current table.
func (s *scanner) keyValue() {
	line, start := s.line(s.i), s.lineStart(s.i)
	key := s.key()
	s.skipBlank(false)
	if len(key) == 0 || s.peek(0) != '=' {
		s.skipLine()
		return
	}
	s.i++
	full := append(append([]string{}, s.ctx...), key...)
	s.noteTop(full[0], line)
	s.noteInElement(full, line)
	s.skipBlank(false)
	if len(full) == 1 && elementArrays[full[0]] && s.peek(0) == '[' {
		s.array(full[0])
		return
	}
	s.value()
	s.noteSpan(full, span{start, s.i})
}

// noteSpan records where a `key = value` that ends at sp.end sits.
func (s *scanner) noteSpan(full []string, sp span) {
	if len(s.ctx) == 0 {
		if _, ok := s.lay.topSpans[full[0]]; !ok {
			s.lay.topSpans[full[0]] = sp
		}
		return
	}
	e := s.latest(full)
	if e == nil {
		return
	}
	e.end = sp.end
	if s.inArr == e {
		e.direct = sp.end
	}
	_, seen := e.spans[full[1]]
	if len(full) == 2 && s.inArr == e && !seen && !e.complex[full[1]] {
		e.spans[full[1]] = sp
		return
	}
	delete(e.spans, full[1])
	e.complex[full[1]] = true
}

// noteTop records the first line of a top-level key.
func (s *scanner) noteTop(key string, line int) {
	if _, ok := s.lay.top[key]; !ok {
		s.lay.top[key] = line
	}
}

// noteInElement records rules.x / tests.x keys in the latest element.
func (s *scanner) noteInElement(full []string, line int) {
	if len(full) < 2 || !elementArrays[full[0]] {
		return
	}
	es := s.lay.elems[full[0]]
	if len(es) == 0 {
		return
	}
	if _, ok := es[len(es)-1].keys[full[1]]; !ok {
		es[len(es)-1].keys[full[1]] = line
	}
}

func (s *scanner) newElement(array string, line int) *element {
	e := &element{line: line, keys: map[string]int{}, spans: map[string]span{}, complex: map[string]bool{}}
	s.lay.elems[array] = append(s.lay.elems[array], e)
	return e
}

// array reads `rules = [ {...}, {...} ]`, one element per inline table.
func (s *scanner) array(name string) {
	s.i++
	for s.i < len(s.src) {
		start := s.i
		s.skipBlank(true)
		switch s.peek(0) {
		case ']':
			s.i++
			return
		case ',':
			s.i++
		case '{':
			e := s.newElement(name, s.line(s.i))
			e.inline = true
			s.inlineTable(e)
		default:
			s.value()
		}
		if s.i == start {
			s.i++
		}
	}
}

// value skips one value of any kind.
func (s *scanner) value() {
	switch s.peek(0) {
	case '"', '\'':
		s.str()
	case '[':
		s.nested('[', ']')
	case '{':
		s.inlineTable(nil)
	default:
		// Numbers, booleans, dates; a date may hold a space, so stop only
		// at what ends a value.
		for s.i < len(s.src) && bytes.IndexByte([]byte(",]}\n#"), s.src[s.i]) < 0 {
			s.i++
		}
	}
}

// nested skips a bracketed value, minding strings and comments inside it.
func (s *scanner) nested(open, close byte) {
	depth := 0
	for s.i < len(s.src) {
		switch c := s.src[s.i]; c {
		case '"', '\'':
			s.str()
			continue
		case '#':
			s.skipLine()
			continue
		case open:
			depth++
		case close:
			depth--
		}
		s.i++
		if depth <= 0 {
			return
		}
	}
}

// inlineTable reads `{ k = v, ... }`, recording first-level keys in e.
func (s *scanner) inlineTable(e *element) {
	s.i++
	for s.i < len(s.src) {
		start := s.i
		s.skipBlank(true)
		switch s.peek(0) {
		case '}':
			s.i++
			return
		case ',':
			s.i++
			continue
		}
		line := s.line(s.i)
		key := s.key()
		s.skipBlank(false)
		if s.peek(0) == '=' {
			s.i++
			s.skipBlank(false)
			if e != nil && len(key) > 0 {
				if _, ok := e.keys[key[0]]; !ok {
					e.keys[key[0]] = line
				}
			}
			s.value()
		}
		if s.i == start {
			s.i++
		}
	}
}

// key reads a dotted key of bare and quoted parts.
func (s *scanner) key() []string {
	var parts []string
	for {
		s.skipBlank(false)
		part, ok := s.keyPart()
		if !ok {
			return parts
		}
		parts = append(parts, part)
		s.skipBlank(false)
		if s.peek(0) != '.' {
			return parts
		}
		s.i++
	}
}

func (s *scanner) keyPart() (string, bool) {
	switch s.peek(0) {
	case '"':
		raw := s.str()
		if u, err := strconv.Unquote(`"` + raw + `"`); err == nil {
			return u, true
		}
		return raw, true
	case '\'':
		return s.str(), true
	}
	start := s.i
	for s.i < len(s.src) && bytes.IndexByte([]byte(" \t\r\n.=[]{},#\"'"), s.src[s.i]) < 0 {
		s.i++
	}
	return string(s.src[start:s.i]), s.i > start
}

// str skips a string of any of the four kinds and returns its raw body.
func (s *scanner) str() string {
	q := s.src[s.i]
	delim := []byte{q}
	if s.peek(1) == q && s.peek(2) == q {
		delim = []byte{q, q, q}
	}
	s.i += len(delim)
	start := s.i
	for s.i < len(s.src) {
		if q == '"' && s.src[s.i] == '\\' {
			s.i += 2
			continue
		}
		if bytes.HasPrefix(s.src[s.i:], delim) {
			body := string(s.src[start:s.i])
			s.i += len(delim)
			// A multi-line string may end with up to two more quotes.
			for k := 0; len(delim) == 3 && k < 2 && s.peek(0) == q; k++ {
				s.i++
			}
			return body
		}
		s.i++
	}
	return string(s.src[start:min(s.i, len(s.src))])
}
