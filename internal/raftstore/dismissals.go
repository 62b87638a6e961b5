package raftstore

// Dismissals: the experiments of branches and pull requests a client
// deleted through the API. The leader recreates such an experiment from
// its source on every pass; a dismissal keeps it deleted while the
// source still proposes the same policy (etag), and goes when the source
// proposes another one or is gone (internal/experiments, sync.go).

// MaxDismissals bounds the dismissals table; the leader records none
// beyond it (the experiment may then come back) rather than fail a delete.
const MaxDismissals = 4096

// Dismissal is one deleted source experiment and the etag of the policy
// it had when deleted.
type Dismissal struct {
	Name string `json:"name"`
	Etag string `json:"etag"`
}

// PutDismissal records a dismissal under its experiment name.
type PutDismissal struct {
	Dismissal Dismissal `json:"dismissal"`
}

// DeleteDismissal forgets a dismissal. Deleting an unknown one is not an
// error.
type DeleteDismissal struct {
	Name string `json:"name"`
}

// CommandType implements Payload.
func (PutDismissal) CommandType() CommandType { return TypePutDismissal }

// CommandType implements Payload.
func (DeleteDismissal) CommandType() CommandType { return TypeDeleteDismissal }

// Validate implements Payload.
func (p PutDismissal) Validate() error {
	return first(experimentName(p.Dismissal.Name), key("etag", p.Dismissal.Etag))
}

// Validate implements Payload.
func (p DeleteDismissal) Validate() error { return experimentName(p.Name) }

func applyPutDismissal(s *State, p PutDismissal) error {
	if err := roomFor(s.Dismissed, p.Dismissal.Name, MaxDismissals, "dismissed experiments"); err != nil {
		return err
	}
	s.Dismissed[p.Dismissal.Name] = p.Dismissal
	return nil
}

func applyDeleteDismissal(s *State, p DeleteDismissal) error {
	delete(s.Dismissed, p.Name)
	return nil
}
