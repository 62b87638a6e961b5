package deploy_test

import (
	"strings"
	"testing"
)

// promqlKeywords are the words of PromQL that are not metric names.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	"atan2": true,
	// aggregation operators, which may come before their by/without clause
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true, "stdvar": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true,
}

// labelListers are the keywords followed by a parenthesised label list.
var labelListers = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// metricNames returns the metric names a PromQL expression selects: the
// identifiers that are not functions, keywords, label names (inside {},
// by (...) and the like), strings, durations, numbers or Grafana
// variables ($job). It is not a parser, but it reads every expression
// this repository ships, which the tests check it against.
func metricNames(expr string) []string {
	var out []string
	rs := []rune(expr)
	for i := 0; i < len(rs); {
		c := rs[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(rs, i)
		case c == '{':
			i = skipTo(rs, i, '}')
		case c == '[':
			i = skipTo(rs, i, ']')
		case c == '$':
			i = skipIdent(rs, i+1)
		case c >= '0' && c <= '9' || c == '.':
			i = skipIdent(rs, i+1) // 1e3, 5m, 0.01
		case isIdentStart(c):
			end := skipIdent(rs, i)
			word := string(rs[i:end])
			next := nextNonSpace(rs, end)
			switch {
			case labelListers[strings.ToLower(word)] && next < len(rs) && rs[next] == '(':
				end = skipTo(rs, next, ')')
			case promqlKeywords[strings.ToLower(word)]:
			case next < len(rs) && rs[next] == '(':
				// a function or an aggregation
			default:
				out = append(out, word)
			}
			i = end
		default:
			i++
		}
	}
	return out
}

func isIdentStart(c rune) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func skipIdent(rs []rune, i int) int {
	for i < len(rs) && (isIdentStart(rs[i]) || rs[i] >= '0' && rs[i] <= '9' || rs[i] == '.') {
		i++
	}
	return i
}

func nextNonSpace(rs []rune, i int) int {
	for i < len(rs) && (rs[i] == ' ' || rs[i] == '\t' || rs[i] == '\n') {
		i++
	}
	return i
}

// skipTo returns the index after the close that ends the bracket at i,
// skipping strings inside it.
func skipTo(rs []rune, i int, close rune) int {
	for i++; i < len(rs); i++ {
		switch rs[i] {
		case '"', '\'', '`':
			i = skipString(rs, i) - 1
		case close:
			return i + 1
		}
	}
	return i
}

func skipString(rs []rune, i int) int {
	q := rs[i]
	for i++; i < len(rs); i++ {
		if rs[i] == '\\' && q != '`' {
			i++
			continue
		}
		if rs[i] == q {
			return i + 1
		}
	}
	return i
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		`sum by (job) (increase(reconciler_reconcile_total{result="invalid"}[15m])) > 0`:              "reconciler_reconcile_total",
		`a < on (job) group_left () max by (job) (b)`:                                                 "a b",
		`x - time() < 30 * 86400`:                                                                     "x",
		`histogram_quantile(0.99, sum by (le) (rate(h_bucket{policy=~"$policy"}[$__rate_interval])))`: "h_bucket",
		`rate(y{a="}"}[5m]) and on() vector(1) unless z offset 5m`:                                    "y z",
		`sum without (instance) (up) / ignoring(code) count(c{code!~"2.."})`:                          "up c",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}
