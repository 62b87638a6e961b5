package engine

import "strings"

// RedactMatchError is a Decision.Error fit for a log line: a rule's run-time
// error can quote the request (cel-go's "no such key: <key>", a timestamp
// that does not parse), and logs must not hold request values (issue 22,
// finding 9). The rule's name and the kind of error stay; the key after
// "no such key" and every double-quoted string after the rule's name go.
func RedactMatchError(msg string) string {
	prefix, rest := "", msg
	if strings.HasPrefix(msg, "rule ") {
		if i := strings.Index(msg, `": `); i >= 0 {
			prefix, rest = msg[:i+3], msg[i+3:]
		}
	}
	if i := strings.Index(rest, "no such key"); i >= 0 {
		rest = rest[:i+len("no such key")]
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			break
		}
		b.WriteString(rest[:i])
		b.WriteString(`"…"`)
		j := strings.IndexByte(rest[i+1:], '"')
		if j < 0 {
			rest = ""
			break
		}
		rest = rest[i+1+j+1:]
	}
	b.WriteString(rest)
	return prefix + b.String()
}
