package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Budgets of one policy file, checked before the TOML parser sees it.
// docs/policy-language.md and docs/security.md document them; change both
// together.
//
// Why a scan before parsing: BurntSushi/toml recurses once per nested array
// or inline table, so a few megabytes of '[' overflow the goroutine stack,
// which Go cannot recover from (the whole process dies, and the next leader
// validating the same pull request dies too). And its bookkeeping copies
// the full key path for every key and every table it opens, so time and
// memory grow with the square of the nesting: an 80 KB file of nested
// inline tables allocates tens of gigabytes, and so does a dotted key or a
// table header with ten thousand parts. Bounding the size and the depth
// bounds both (TestTOMLBombs measures the worst case the budgets allow).
const (
	// MaxFileBytes is the largest policy file read. Thousands of rules
	// fit in it; generated data belongs outside the policies root.
	MaxFileBytes = 1 << 20

	// MaxNesting is how deep a value may sit: the parts of its table
	// header, of its dotted key, and every array or inline table around
	// it count one level each. `[[tests]]` then `request = { headers = {
	// a = "b" } }` is 4; test requests with attributes nested a few
	// levels fit easily.
	MaxNesting = 16

	// MaxParseWork bounds the parser's work on one file: every key,
	// table header, array and inline table costs the square of its depth
	// (what the parser's bookkeeping costs, give or take a constant). A
	// policy of 5,000 rules costs about 100,000; a file of chains of
	// inline tables at the depth limit would cost thirty times this.
	MaxParseWork = 1_000_000
)

// Budgets of one merged policy, which is what an experiment carries
// through the raft log and what every node compiles.
const (
	// MaxPolicyRules is the most rules one policy may have after merging.
	// Compiling a rule allocates about 60 KB on the way (3.6 KB kept), so
	// 55,000 rules took a leader to 1.8 GB.
	MaxPolicyRules = 5_000

	// MaxPolicyTests is the most tests one policy may have.
	MaxPolicyTests = 5_000

	// MaxPolicyBytes bounds a merged policy's canonical JSON form as
	// encoding/json writes it into a raft command (HTML characters such as
	// the "&&" of CEL escaped, six bytes each): an experiment stores it in
	// one command of at most 1 MiB, with room for the rest of the
	// experiment.
	MaxPolicyBytes = 768 << 10
)

// CheckSize reports a policy over the budgets of one merged policy
// (rules, tests, canonical size), as a tree's policy is held to them: for
// a policy that comes whole, through the API, rather than from files.
func CheckSize(p *Policy) error {
	if e := checkPolicySize(p, ""); e != nil {
		return e
	}
	return nil
}

// checkPolicySize reports a merged policy over the policy budgets, at its
// main file.
func checkPolicySize(p *Policy, main string) *Error {
	var msg string
	switch {
	case len(p.Rules) > MaxPolicyRules:
		msg = fmt.Sprintf("policy %q has %d rules, over the limit of %d", p.Name, len(p.Rules), MaxPolicyRules)
	case len(p.Tests) > MaxPolicyTests:
		msg = fmt.Sprintf("policy %q has %d tests, over the limit of %d", p.Name, len(p.Tests), MaxPolicyTests)
	default:
		if n := escapedSize(p.Canonical()); n > MaxPolicyBytes {
			msg = fmt.Sprintf("policy %q is %d bytes merged (canonical JSON, escaped as a raft command holds it), over the limit of %d", p.Name, n, MaxPolicyBytes)
		}
	}
	if msg == "" {
		return nil
	}
	return &Error{File: main, Msg: msg}
}

// escapedSize is the length of JSON once encoding/json has compacted and
// escaped it for HTML, as it does with a json.RawMessage inside a raft
// command.
func escapedSize(js []byte) int {
	var b bytes.Buffer
	if err := json.Compact(&b, js); err != nil {
		return len(js)
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, b.Bytes())
	return esc.Len()
}

// checkBudget says what is wrong with a file before it is parsed, as a line
// and a message; line 0 and "" when nothing is.
func checkBudget(data []byte) (int, string) {
	if len(data) > MaxFileBytes {
		return 0, fmt.Sprintf("file is %d bytes, over the %d byte limit of a policy file", len(data), MaxFileBytes)
	}
	s := nestingScanner{data: data}
	pos, ok := s.scan()
	line := bytes.Count(data[:pos], []byte("\n")) + 1
	switch {
	case ok:
		return 0, ""
	case !s.tooDeep:
		return line, fmt.Sprintf("too many deeply nested keys and tables for the parser (its work grows with the square of the depth; over %d units here)", MaxParseWork)
	}
	return line, fmt.Sprintf("value nested more than %d levels deep (tables, dotted keys, arrays and inline tables count one level each)", MaxNesting)
}

// nestingScanner follows just enough of the TOML grammar to know, at each
// byte, how deep the value being written is: strings and comments (whose
// brackets and dots do not count), table headers, keys and values. It
// never fails on bad syntax: it stops worrying there and leaves the error
// to the parser, which stops at the first one before nesting any deeper
// than what was scanned.
type nestingScanner struct {
	data []byte
	i    int
	// header is the depth of the current [table] or [[array]]: values at
	// the top level of the document sit below it.
	header int
	// open holds, for each array or inline table that is open, the depth
	// of what it contains; its kind is '[' or '{'.
	open []frame
	// work is the parse work so far (see MaxParseWork).
	work int
	// tooDeep is set when the scan stopped at MaxNesting.
	tooDeep bool
}

// at accounts for something at depth; false when over a budget.
func (s *nestingScanner) at(depth int) bool {
	if depth > MaxNesting {
		s.tooDeep = true
		return false
	}
	s.work += depth * depth
	return s.work <= MaxParseWork
}

type frame struct {
	kind  byte
	depth int
}

// base is the depth of a key written where the scanner is.
func (s *nestingScanner) base() int {
	if n := len(s.open); n > 0 {
		return s.open[n-1].depth
	}
	return s.header
}

// scan walks the document; it returns false and the offset where a value
// nests deeper than MaxNesting.
func (s *nestingScanner) scan() (int, bool) {
	for s.skipSpace(true); s.i < len(s.data); s.skipSpace(true) {
		var ok bool
		if s.data[s.i] == '[' {
			ok = s.tableHeader()
		} else {
			ok = s.keyValue()
		}
		if !ok {
			return s.i, false
		}
		s.skipLine()
	}
	return 0, true
}

// tableHeader reads `[a.b]` or `[[a.b]]`.
func (s *nestingScanner) tableHeader() bool {
	s.i++
	if s.i < len(s.data) && s.data[s.i] == '[' {
		s.i++
	}
	parts, _ := s.key(']')
	s.header = parts
	return s.at(parts)
}

// keyValue reads `a.b = value`, with the value's arrays and inline tables.
func (s *nestingScanner) keyValue() bool {
	parts, ok := s.key('=')
	if !ok {
		return true // not a key: the parser will say so
	}
	if !s.at(s.base() + parts) {
		return false
	}
	s.i++ // '='
	return s.value(s.base() + parts)
}

// key reads a possibly dotted, possibly quoted key up to stop (not
// consumed) and counts its parts; false when the line ends first.
func (s *nestingScanner) key(stop byte) (int, bool) {
	parts := 1
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case stop:
			return parts, true
		case '.':
			parts++
			s.i++
		case '"', '\'':
			s.skipString()
		case '\n', '#':
			return parts, false
		default:
			s.i++
		}
	}
	return parts, false
}

// value reads one value whose key is at depth; arrays and inline tables
// open frames one level deeper. It returns at the end of a top-level
// value's line.
func (s *nestingScanner) value(depth int) bool {
	var ok bool
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case '[', '{':
			if !s.at(depth + 1) {
				return false
			}
			s.open = append(s.open, frame{kind: c, depth: depth + 1})
			depth++
			s.i++
			if c == '{' {
				if depth, ok = s.inlineKey(depth); !ok {
					return false
				}
			}
		case ']', '}':
			if len(s.open) == 0 {
				return true
			}
			s.open = s.open[:len(s.open)-1]
			depth = s.base()
			s.i++
		case ',':
			s.i++
			if n := len(s.open); n > 0 && s.open[n-1].kind == '{' {
				if depth, ok = s.inlineKey(s.base()); !ok {
					return false
				}
			}
		case '"', '\'':
			s.skipString()
		case '#':
			s.skipComment()
		case '\n':
			if len(s.open) == 0 {
				return true
			}
			s.i++
		default:
			s.i++
		}
	}
	return true
}

// inlineKey reads the key of an inline table's entry, if one follows (not
// for `{}` or a trailing comma), and returns the depth of its value: the
// table's depth plus the key's parts beyond the first. Newlines and
// comments are skipped, as TOML 1.1 allows them in inline tables.
func (s *nestingScanner) inlineKey(depth int) (int, bool) {
	s.skipSpace(true)
	if s.i >= len(s.data) || s.data[s.i] == '}' {
		return depth, true
	}
	parts, ok := s.key('=')
	if !ok {
		return depth, true
	}
	s.i++ // '='
	depth += parts - 1
	return depth, s.at(depth)
}

// skipString skips a basic or literal string, single- or multi-line,
// starting at its opening quote. A single-line string ends at the line's
// end even when unterminated, as the parser's error does.
func (s *nestingScanner) skipString() {
	q := s.data[s.i]
	if bytes.HasPrefix(s.data[s.i:], []byte{q, q, q}) {
		s.i += 3
		end := []byte{q, q, q}
		for s.i < len(s.data) {
			if q == '"' && s.data[s.i] == '\\' {
				s.i += 2
				continue
			}
			if bytes.HasPrefix(s.data[s.i:], end) {
				s.i += 3
				// up to two more quotes belong to the string (`""""` ends one late)
				for k := 0; k < 2 && s.i < len(s.data) && s.data[s.i] == q; k++ {
					s.i++
				}
				return
			}
			s.i++
		}
		return
	}
	for s.i++; s.i < len(s.data); s.i++ {
		switch s.data[s.i] {
		case '\\':
			if q == '"' {
				s.i++
			}
		case q:
			s.i++
			return
		case '\n':
			return
		}
	}
}

// skipSpace skips blanks, and with lines set also newlines and comments.
func (s *nestingScanner) skipSpace(lines bool) {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\r':
			s.i++
		case '\n':
			if !lines {
				return
			}
			s.i++
		case '#':
			if !lines {
				return
			}
			s.skipComment()
		default:
			return
		}
	}
}

func (s *nestingScanner) skipComment() {
	for s.i < len(s.data) && s.data[s.i] != '\n' {
		s.i++
	}
}

// skipLine moves past the end of the current line.
func (s *nestingScanner) skipLine() {
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch c {
		case '"', '\'':
			s.skipString()
			continue
		case '\n':
			s.i++
			return
		}
		s.i++
	}
}
