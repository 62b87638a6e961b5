package githubemu

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// checkRunBody is what checks/create and checks/update take. go-github
// always sends "name" on update, possibly "" (meaning: unchanged).
type checkRunBody struct {
	Name        *string    `json:"name"`
	HeadSHA     *string    `json:"head_sha"`
	DetailsURL  *string    `json:"details_url"`
	ExternalID  *string    `json:"external_id"`
	Status      *string    `json:"status"`
	Conclusion  *string    `json:"conclusion"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	Output      *struct {
		Title   *string `json:"title"`
		Summary *string `json:"summary"`
		Text    *string `json:"text"`
	} `json:"output"`
}

// checksAPI serves check runs: create and update.
type checksAPI struct {
	*store
	*renderer
}

// conclusions GitHub accepts.
var conclusions = []string{"action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"}

// createCheckRun serves checks/create.
func (s *checksAPI) createCheckRun(w http.ResponseWriter, r *http.Request, rp *repo) {
	var b checkRunBody
	if !decodeBody(w, r, &b) || !required(w, "CheckRun", map[string]*string{"name": b.Name, "head_sha": b.HeadSHA}) {
		return
	}
	if *b.Name == "" {
		writeInvalid(w, fieldError{Resource: "CheckRun", Field: "name", Code: "missing_field"})
		return
	}
	c := &CheckRun{ID: s.newID(), Name: *b.Name, HeadSHA: *b.HeadSHA, Status: "queued", StartedAt: s.opts.Now()}
	if !s.applyCheckRun(w, c, b) {
		return
	}
	rp.checks[c.ID] = c
	writeJSON(w, http.StatusCreated, s.checkRunObject(c, rp))
}

// updateCheckRun serves checks/update.
func (s *checksAPI) updateCheckRun(w http.ResponseWriter, r *http.Request, rp *repo) {
	id, ok := intPath(w, r, "id")
	if !ok {
		return
	}
	c := rp.checks[id]
	if c == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	var b checkRunBody
	if !decodeBody(w, r, &b) {
		return
	}
	next := *c
	if b.Name != nil && *b.Name != "" {
		next.Name = *b.Name
	}
	if s.applyCheckRun(w, &next, b) {
		*c = next
		writeJSON(w, http.StatusOK, s.checkRunObject(c, rp))
	}
}

// applyCheckRun copies the optional fields onto c with GitHub's rules: a
// conclusion completes the run; "completed" needs a conclusion.
func (s *checksAPI) applyCheckRun(w http.ResponseWriter, c *CheckRun, b checkRunBody) bool {
	if b.Status != nil && !oneOf(*b.Status, "queued", "in_progress", "completed", "waiting", "requested", "pending") {
		writeInvalid(w, fieldError{Resource: "CheckRun", Field: "status", Code: "invalid"})
		return false
	}
	if b.Conclusion != nil && !oneOf(*b.Conclusion, conclusions...) {
		writeInvalid(w, fieldError{Resource: "CheckRun", Field: "conclusion", Code: "invalid"})
		return false
	}
	setStr(&c.Status, b.Status)
	setStr(&c.Conclusion, b.Conclusion)
	setStr(&c.DetailsURL, b.DetailsURL)
	setStr(&c.ExternalID, b.ExternalID)
	if c.Conclusion != "" {
		c.Status = "completed"
	}
	if c.Status == "completed" && c.Conclusion == "" {
		writeInvalid(w, fieldError{Resource: "CheckRun", Field: "conclusion", Code: "missing_field"})
		return false
	}
	if b.Output != nil {
		setStr(&c.Title, b.Output.Title)
		setStr(&c.Summary, b.Output.Summary)
		setStr(&c.Text, b.Output.Text)
	}
	if b.StartedAt != nil {
		c.StartedAt = *b.StartedAt
	}
	if c.Status == "completed" && c.CompletedAt.IsZero() {
		c.CompletedAt = s.opts.Now()
	}
	if b.CompletedAt != nil {
		c.CompletedAt = *b.CompletedAt
	}
	return true
}

// setStr sets *dst from a present optional value.
func setStr(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

// checkRunObject renders c from the check-run example.
func (s *renderer) checkRunObject(c *CheckRun, rp *repo) obj {
	o := s.shape("rest", "check-run", rp)
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	id := strconv.FormatInt(c.ID, 10)
	o["id"], o["node_id"], o["name"], o["head_sha"] = c.ID, nodeID("08:CheckRun", c.ID), c.Name, c.HeadSHA
	o["url"], o["html_url"] = api+"/check-runs/"+id, s.URL()+"/"+rp.full()+"/runs/"+id
	o["details_url"], o["external_id"] = nilIfEmpty(c.DetailsURL), c.ExternalID
	o["status"], o["conclusion"] = c.Status, nilIfEmpty(c.Conclusion)
	o["started_at"], o["completed_at"] = stampOrNil(c.StartedAt), stampOrNil(c.CompletedAt)
	o["output"] = obj{"title": nilIfEmpty(c.Title), "summary": nilIfEmpty(c.Summary), "text": nilIfEmpty(c.Text),
		"annotations_count": 0, "annotations_url": api + "/check-runs/" + id + "/annotations"}
	o["pull_requests"] = s.checkRunPulls(c, rp)
	return o
}

// checkRunPulls lists the open pull requests whose head is the run's SHA,
// in the minimal form check runs carry.
func (s *renderer) checkRunPulls(c *CheckRun, rp *repo) []any {
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	out := []any{}
	for _, p := range rp.pulls {
		if p.State != "open" || p.HeadSHA != c.HeadSHA {
			continue
		}
		mini := obj{"id": rp.id, "url": api, "name": rp.name}
		out = append(out, obj{"url": api + "/pulls/" + strconv.Itoa(p.Number), "id": p.ID, "number": p.Number,
			"head": obj{"ref": p.HeadRef, "sha": p.HeadSHA, "repo": mini},
			"base": obj{"ref": p.BaseRef, "sha": rp.refs[normRef(p.BaseRef)], "repo": mini}})
	}
	return out
}
