package engine

import (
	"regexp"
	"regexp/syntax"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// A fast path for matches() with a pattern that is a list of words.
//
// Block-lists are written as `(?i)(sqlmap|nikto|...)`. Go's regexp runs
// them with case folding at about 12 µs per user agent, most of a decision
// of the edge-firewall example. Such a pattern matches exactly when the
// input contains one of finitely many words, and on ASCII input a word is
// a sequence of sets of ASCII bytes: a letter under (?i) is its ASCII case
// pair (the other members of its fold orbit, such as U+212A KELVIN SIGN for
// k, are not ASCII), a character class its ASCII members. A plain search
// for those words is then exactly RE2's unanchored match. An input with any
// other byte is matched by the compiled regexp, as before.
//
// The optimization replaces the function only: the call keeps its
// function, overload and arguments and is built by interpreter.NewCall as
// cel-go's own regex optimization builds it, so the cost tracker charges
// exactly what it charged before and decisions under the cost limit do not
// change.

// maxLiteralWords bounds the words a pattern may expand to; beyond it the
// pattern is left to the regexp.
const maxLiteralWords = 128

// literalRegexes is the program option that installs the fast path for
// both overloads of matches(). The decorator prefers an optimization
// registered for the call's overload to one registered for its function
// name, which is how these win over the one cel.OptOptimize adds.
var literalRegexes = cel.OptimizeRegex(
	&interpreter.RegexOptimization{Function: overloads.Matches, OverloadID: overloads.MatchesString,
		RegexIndex: 1, Factory: literalMatchesCall},
	&interpreter.RegexOptimization{Function: overloads.Matches, OverloadID: overloads.Matches,
		RegexIndex: 1, Factory: literalMatchesCall},
)

// literalRegexPlans counts the matches() calls planned with a word search;
// tests read it to see that the fast path is taken.
var literalRegexPlans atomic.Int64

// literalMatchesCall is the RegexOptimization factory: a wordMatcher when
// the pattern is a list of words, cel-go's default optimization otherwise.
func literalMatchesCall(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
	m, ok := newWordMatcher(pattern)
	if !ok {
		return interpreter.MatchesRegexOptimization.Factory(call, pattern)
	}
	literalRegexPlans.Add(1)
	// The same checks and results as cel-go's MatchesRegexOptimization.
	return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(values ...ref.Val) ref.Val {
		if len(values) != 2 {
			return types.NoSuchOverloadErr()
		}
		in, ok := values[0].Value().(string)
		if !ok {
			return types.NoSuchOverloadErr()
		}
		return types.Bool(m.match(in))
	}), nil
}

// wordMatcher is RE2's unanchored match of a pattern that is a list of
// words: a word search on ASCII input, the compiled regexp on other input.
type wordMatcher struct {
	words *wordList
	re    *regexp.Regexp
}

// newWordMatcher returns the matcher of pattern, or false when the pattern
// is not a list of words (or does not compile, which the default reports).
func newWordMatcher(pattern string) (*wordMatcher, bool) {
	words, ok := literalWordsOf(pattern)
	if !ok {
		return nil, false
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, false
	}
	return &wordMatcher{words: words, re: re}, true
}

// match is re.MatchString(in).
func (m *wordMatcher) match(in string) bool {
	if !isASCII(in) {
		return m.re.MatchString(in)
	}
	return m.words.search(in)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// byteSet is a set of ASCII bytes.
type byteSet [2]uint64

func (b *byteSet) add(c rune)      { b[c>>6] |= 1 << (c & 63) }
func (b *byteSet) has(c byte) bool { return c < utf8.RuneSelf && b[c>>6]&(1<<(c&63)) != 0 }
func (b *byteSet) union(o byteSet) { b[0], b[1] = b[0]|o[0], b[1]|o[1] }

// word is a string to search for, as the set of bytes allowed at each of
// its positions.
type word []byteSet

// wordList is a pattern that matches where any of its words occurs; first
// holds the bytes any word may start with, to skip other positions fast.
type wordList struct {
	words []word
	first byteSet
	empty bool // one of the words is empty, which occurs in every string
}

// search reports whether ASCII s contains one of the words.
func (l *wordList) search(s string) bool {
	if l.empty {
		return true
	}
	for i := 0; i < len(s); i++ {
		if !l.first.has(s[i]) {
			continue
		}
		for _, w := range l.words {
			if w.at(s, i) {
				return true
			}
		}
	}
	return false
}

// at reports whether w occurs in s at i.
func (w word) at(s string, i int) bool {
	if len(s)-i < len(w) {
		return false
	}
	for j, set := range w {
		if !set.has(s[i+j]) {
			return false
		}
	}
	return true
}

// literalWordsOf returns the words of a pattern that is, after parsing and
// simplification, an alternation of ASCII literals (case-folded or not),
// possibly factored by the parser into concatenations, groups, empty
// alternatives and character classes, with no anchors or repetitions.
func literalWordsOf(pattern string) (*wordList, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false
	}
	words, ok := expandWords(re.Simplify())
	if !ok || len(words) == 0 {
		return nil, false
	}
	l := &wordList{words: words}
	for _, w := range words {
		if len(w) == 0 {
			l.empty = true
			continue
		}
		l.first.union(w[0])
	}
	return l, true
}

// expandWords lists the words re matches, or false when re is not of the
// shape literalWordsOf accepts or has more than maxLiteralWords words.
func expandWords(re *syntax.Regexp) ([]word, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return literalWord(re.Rune, re.Flags&syntax.FoldCase != 0)
	case syntax.OpCharClass:
		return []word{{classBytes(re.Rune)}}, true
	case syntax.OpEmptyMatch:
		// The parser factors (bot|bots) into bot(?:(?:)|s).
		return []word{{}}, true
	case syntax.OpCapture:
		return expandWords(re.Sub[0])
	case syntax.OpAlternate:
		var out []word
		for _, sub := range re.Sub {
			words, ok := expandWords(sub)
			if !ok || len(out)+len(words) > maxLiteralWords {
				return nil, false
			}
			out = append(out, words...)
		}
		return out, true
	case syntax.OpConcat:
		return concatWords(re.Sub)
	}
	return nil, false
}

// concatWords lists every concatenation of a word of each sub-expression.
func concatWords(subs []*syntax.Regexp) ([]word, bool) {
	out := []word{{}}
	for _, sub := range subs {
		words, ok := expandWords(sub)
		if !ok || len(out)*len(words) > maxLiteralWords {
			return nil, false
		}
		next := make([]word, 0, len(out)*len(words))
		for _, prefix := range out {
			for _, w := range words {
				next = append(next, append(append(word{}, prefix...), w...))
			}
		}
		out = next
	}
	return out, true
}

// literalWord is a literal as one word. Each ASCII rune allows itself and,
// when case-folded, the ASCII members of its fold orbit, which is what RE2
// matches on ASCII input. Non-ASCII runes are refused.
func literalWord(runes []rune, fold bool) ([]word, bool) {
	w := make(word, len(runes))
	for i, r := range runes {
		if r >= utf8.RuneSelf {
			return nil, false
		}
		w[i].add(r)
		for f := unicode.SimpleFold(r); fold && f != r; f = unicode.SimpleFold(f) {
			if f < utf8.RuneSelf {
				w[i].add(f)
			}
		}
	}
	return []word{w}, true
}

// classBytes is the ASCII part of a character class (pairs of inclusive
// bounds, case folding already applied by the parser): on ASCII input the
// class matches exactly these bytes.
func classBytes(ranges []rune) byteSet {
	var b byteSet
	for i := 0; i+1 < len(ranges); i += 2 {
		for c := ranges[i]; c <= ranges[i+1] && c < utf8.RuneSelf; c++ {
			b.add(c)
		}
	}
	return b
}
