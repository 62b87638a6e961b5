package githubemu

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxCommentBody is GitHub's limit on a comment body, in characters.
const MaxCommentBody = 65536

// commentBody is what issues/create-comment and issues/update-comment take.
type commentBody struct {
	Body *string `json:"body"`
}

// issuesAPI serves the issue-comments family: list, get, create, update.
type issuesAPI struct {
	*store
	*renderer
	pager
}

// listComments serves issues/list-comments: oldest first, paginated,
// optionally only those updated at or after since.
func (s *issuesAPI) listComments(w http.ResponseWriter, r *http.Request, rp *repo) {
	n, ok := s.issueFor(w, r, rp)
	if !ok {
		return
	}
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeInvalid(w, fieldError{Resource: "IssueComment", Field: "since", Code: "invalid"})
			return
		}
		since = t
	}
	var list []*Comment
	for _, c := range rp.comments {
		if c.Issue == n && !c.UpdatedAt.Before(since) {
			list = append(list, c)
		}
	}
	lo, hi := s.paginate(w, r, len(list))
	items := make([]obj, 0, hi-lo)
	for _, c := range list[lo:hi] {
		items = append(items, s.commentObject(c, rp))
	}
	writeJSON(w, http.StatusOK, items)
}

// issueFor finds the issue named in the path. Only pull requests exist as
// issues here; others answer 404.
func (s *issuesAPI) issueFor(w http.ResponseWriter, r *http.Request, rp *repo) (int, bool) {
	n, ok := intPath(w, r, "number")
	if !ok {
		return 0, false
	}
	if rp.pulls[int(n)] == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return 0, false
	}
	return int(n), true
}

// createComment serves issues/create-comment, authored by the bot.
func (s *issuesAPI) createComment(w http.ResponseWriter, r *http.Request, rp *repo) {
	n, ok := s.issueFor(w, r, rp)
	if !ok {
		return
	}
	var b commentBody
	if !decodeBody(w, r, &b) || !validCommentBody(w, b.Body) {
		return
	}
	c := s.addComment(rp, n, s.opts.BotLogin, *b.Body)
	o := s.commentObject(c, rp)
	w.Header().Set("Location", o["url"].(string))
	writeJSON(w, http.StatusCreated, o)
}

// issueGet serves issues/list-comments (".../issues/{number}/comments")
// and issues/get-comment (".../issues/comments/{id}").
func (s *issuesAPI) issueGet(w http.ResponseWriter, r *http.Request, rp *repo) {
	switch {
	case r.PathValue("number") == "comments":
		r.SetPathValue("id", r.PathValue("sub"))
		s.getComment(w, r, rp)
	case r.PathValue("sub") == "comments":
		s.listComments(w, r, rp)
	default:
		writeError(w, http.StatusNotFound, "Not Found")
	}
}

// getComment serves issues/get-comment: a deleted or unknown id is 404.
func (s *issuesAPI) getComment(w http.ResponseWriter, r *http.Request, rp *repo) {
	if c, ok := commentFor(w, r, rp); ok {
		writeJSON(w, http.StatusOK, s.commentObject(c, rp))
	}
}

// commentFor finds the comment whose id is in the path, else answers 404.
func commentFor(w http.ResponseWriter, r *http.Request, rp *repo) (*Comment, bool) {
	id, ok := intPath(w, r, "id")
	if !ok {
		return nil, false
	}
	for _, cm := range rp.comments {
		if cm.ID == id {
			return cm, true
		}
	}
	writeError(w, http.StatusNotFound, "Not Found")
	return nil, false
}

// updateComment serves issues/update-comment.
func (s *issuesAPI) updateComment(w http.ResponseWriter, r *http.Request, rp *repo) {
	c, ok := commentFor(w, r, rp)
	if !ok {
		return
	}
	var b commentBody
	if !decodeBody(w, r, &b) || !validCommentBody(w, b.Body) {
		return
	}
	c.Body, c.UpdatedAt = *b.Body, s.commentTime()
	writeJSON(w, http.StatusOK, s.commentObject(c, rp))
}

// validCommentBody answers 422 like GitHub for a missing, blank or too long
// body.
func validCommentBody(w http.ResponseWriter, body *string) bool {
	switch {
	case body == nil:
		writeInvalid(w, fieldError{Resource: "IssueComment", Field: "body", Code: "missing_field"})
	case strings.TrimSpace(*body) == "":
		writeInvalid(w, fieldError{Resource: "IssueComment", Field: "body", Code: "missing_field", Message: "Body cannot be blank"})
	case utf8.RuneCountInString(*body) > MaxCommentBody:
		writeInvalid(w, fieldError{Resource: "IssueComment", Field: "body", Code: "custom",
			Message: "Body is too long (maximum is " + strconv.Itoa(MaxCommentBody) + " characters)"})
	default:
		return true
	}
	return false
}

// commentObject renders c from the issue-comment example.
func (s *renderer) commentObject(c *Comment, rp *repo) obj {
	o := s.shape("rest", "issue-comment", rp)
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	id, num := strconv.FormatInt(c.ID, 10), strconv.Itoa(c.Issue)
	o["id"], o["node_id"], o["body"] = c.ID, nodeID("012:IssueComment", c.ID), c.Body
	o["url"], o["issue_url"] = api+"/issues/comments/"+id, api+"/issues/"+num
	o["html_url"] = s.URL() + "/" + rp.full() + "/pull/" + num + "#issuecomment-" + id
	o["created_at"], o["updated_at"] = stamp(c.CreatedAt), stamp(c.UpdatedAt)
	o["author_association"] = association(rp, c.User)
	s.setUser(child(o, "user"), c.User)
	return o
}

// association is the author_association GitHub would report. It is only
// informational: permission checks must use the permission API.
func association(rp *repo, login string) string {
	switch {
	case strings.EqualFold(login, rp.owner):
		return "OWNER"
	case rp.perms[strings.ToLower(login)] != "" && rp.perms[strings.ToLower(login)] != "none":
		return "COLLABORATOR"
	}
	return "NONE"
}
