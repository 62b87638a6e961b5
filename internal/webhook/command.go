package webhook

import (
	"fmt"
	"strings"
)

// CommandPrefix starts a comment command (CONTRACT §5).
const CommandPrefix = "/reconciler"

// Verbs of comment commands.
const (
	VerbPreview = "preview" // Args: ["start"] or ["stop"]
	VerbStatus  = "status"
	VerbCommit  = "commit"
	VerbHelp    = "help"
)

// Command is a comment command on a pull request. The webhook has not
// checked that User may run it: the consumer must, through the GitHub API
// (forge.Permission, write or above), never from the payload.
type Command struct {
	PR   int
	User string // the comment author's login
	Verb string // one of the Verb constants
	// Args are the lower-cased arguments: ["start"] or ["stop"] for
	// preview, none otherwise.
	Args      []string
	CommentID int64
	// DeliveryID is the X-GitHub-Delivery that carried it.
	DeliveryID string
	// Error says why the comment was not understood; Verb is then
	// VerbHelp, so the consumer replies with usage and this note.
	Error string
}

// maxQuoted bounds what of a user's input an error note repeats.
const maxQuoted = 40

// ParseCommand reads a comment body. ok is false when the first line is
// not a /reconciler command. The verb is case-insensitive, extra
// whitespace is fine, lines after the first are ignored. A command not
// understood comes back as VerbHelp with Error set.
func ParseCommand(body string) (cmd Command, ok bool) {
	line, _, _ := strings.Cut(body, "\n")
	fields := strings.Fields(line)
	if len(fields) == 0 || !strings.EqualFold(fields[0], CommandPrefix) {
		return Command{}, false
	}
	if len(fields) == 1 {
		return Command{Verb: VerbHelp}, true
	}
	verb, args := strings.ToLower(fields[1]), fields[2:]
	switch verb {
	case VerbPreview:
		if len(args) == 1 && (strings.EqualFold(args[0], "start") || strings.EqualFold(args[0], "stop")) {
			return Command{Verb: VerbPreview, Args: []string{strings.ToLower(args[0])}}, true
		}
		return helpWith("usage: %s preview start|stop", CommandPrefix), true
	case VerbStatus, VerbCommit, VerbHelp:
		if len(args) > 0 {
			return helpWith("%s %s takes no arguments", CommandPrefix, verb), true
		}
		return Command{Verb: verb}, true
	}
	return helpWith("unknown command %q", quoted(fields[1])), true
}

// helpWith is a help command carrying an error note.
func helpWith(format string, args ...any) Command {
	return Command{Verb: VerbHelp, Error: fmt.Sprintf(format, args...)}
}

// quoted cuts user input to a length fit for a reply.
func quoted(s string) string {
	if r := []rune(s); len(r) > maxQuoted {
		return string(r[:maxQuoted]) + "…"
	}
	return s
}
