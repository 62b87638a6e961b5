package githubemu

import (
	"net/http"
)

// mergeBody is pulls/merge's request body; every field is optional.
type mergeBody struct {
	CommitTitle   string  `json:"commit_title"`
	CommitMessage *string `json:"commit_message"`
	SHA           string  `json:"sha"`
	MergeMethod   string  `json:"merge_method"`
}

// mergePull serves pulls/merge with GitHub's answers: 405 when the pull
// request is closed or not mergeable, 409 when sha is not the head, 422 for
// an unknown merge_method, else 200 {sha, merged, message}. The OnMerge
// hook runs without the state lock (it may push to a git server), so merges
// are serialized by their own mutex.
func (s *pullsAPI) mergePull(w http.ResponseWriter, r *http.Request) {
	s.mergeMu.Lock()
	defer s.mergeMu.Unlock()
	req, hook, ok := s.checkMerge(w, r)
	if !ok {
		return
	}
	sha := ""
	if hook != nil {
		var err error
		if sha, err = hook(req); err != nil {
			writeError(w, http.StatusInternalServerError, "merge hook failed: "+err.Error())
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repoFor(w, r)
	if rp == nil {
		return
	}
	p := rp.pulls[req.Number]
	if sha == "" {
		sha = fakeSHA("merge", rp.refs[normRef(p.BaseRef)], p.HeadSHA, req.Method)
	}
	now := s.opts.Now()
	p.State, p.Merged, p.MergedBy, p.MergeCommitSHA = "closed", true, s.opts.BotLogin, sha
	p.MergedAt, p.ClosedAt, p.UpdatedAt = now, now, now
	rp.refs[normRef(p.BaseRef)] = sha
	res := s.shape("rest", "pull-request-merge-result", rp)
	res["sha"], res["merged"], res["message"] = sha, true, "Pull Request successfully merged"
	writeJSON(w, http.StatusOK, res)
}

// checkMerge validates a merge under the state lock and returns what the
// hook needs; it has answered when ok is false.
func (s *pullsAPI) checkMerge(w http.ResponseWriter, r *http.Request) (MergeRequest, func(MergeRequest) (string, error), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repoFor(w, r)
	if rp == nil {
		return MergeRequest{}, nil, false
	}
	p := s.pullFor(w, r, rp)
	var b mergeBody
	if p == nil || !decodeBody(w, r, &b) {
		return MergeRequest{}, nil, false
	}
	if b.MergeMethod == "" {
		b.MergeMethod = "merge"
	}
	switch {
	case b.MergeMethod != "merge" && b.MergeMethod != "squash" && b.MergeMethod != "rebase":
		writeInvalid(w, fieldError{Resource: "PullRequest", Field: "merge_method", Code: "invalid"})
	case p.State != "open" || p.Merged:
		writeJSON(w, http.StatusMethodNotAllowed, obj{"message": "Pull Request is not mergeable", "documentation_url": docsURL})
	case b.SHA != "" && b.SHA != p.HeadSHA:
		writeJSON(w, http.StatusConflict, obj{"message": "Head branch was modified. Review and try the merge again.", "documentation_url": docsURL})
	case p.Mergeable == nil || !*p.Mergeable:
		writeJSON(w, http.StatusMethodNotAllowed, obj{"message": "Pull Request is not mergeable", "documentation_url": docsURL})
	default:
		req := MergeRequest{Repo: rp.full(), Number: p.Number, HeadRef: p.HeadRef, HeadSHA: p.HeadSHA, BaseRef: p.BaseRef,
			Method: b.MergeMethod, CommitTitle: b.CommitTitle, CommitMsg: deref(b.CommitMessage)}
		return req, s.onMerge, true
	}
	return MergeRequest{}, nil, false
}
