package raftstore

// Handlers of the typed tables. Puts replace a record whole; deleting an
// unknown key is not an error (the leader may retry a delete whose result
// it did not see).

func tableHandlers() map[CommandType]handler {
	return map[CommandType]handler{
		TypeLegacyPutExperiment:    row(1, applyLegacyPut),
		TypeLegacyDeleteExperiment: row(1, applyLegacyDelete),
		TypePutExperiment:          versionedRow(PutExperimentListsVersion, applyPutExperiment),
		TypeDeleteExperiment:       row(1, applyDeleteExperiment),
		TypePutDismissal:           row(1, applyPutDismissal),
		TypeDeleteDismissal:        row(1, applyDeleteDismissal),
		TypePutSourceStatus:        row(1, applyPutSourceStatus),
		TypeDeleteSourceStatus:     row(1, applyDeleteSourceStatus),
		TypePutBranch:              row(1, applyPutBranch),
		TypeDeleteBranch:           row(1, applyDeleteBranch),
		TypePutPull:                row(PutPullVersion, applyPutPull),
		TypeDeletePull:             row(1, applyDeletePull),
		TypePutClaim:               row(1, applyPutClaim),
		TypeDeleteClaim:            row(1, applyDeleteClaim),
		TypeTxn:                    row(1, func(*State, Txn) error { return nil }), // Applier.applyTxn
	}
}

func applyPutExperiment(s *State, v uint8, p PutExperiment) error {
	if v < PutExperimentListsVersion && len(p.Lists) > 0 {
		return invalid("experiment %s: lists need version %d", p.Name, PutExperimentListsVersion)
	}
	if err := heldListChunks(s, p.Name, p.Lists); err != nil {
		return err
	}
	old, had := s.Experiments[p.Name]
	s.Experiments[p.Name] = Experiment(p)
	if had && len(old.Lists) > 0 {
		collectChunks(s) // the lists it no longer uses
	}
	return nil
}

func applyDeleteExperiment(s *State, p DeleteExperiment) error {
	old, had := s.Experiments[p.Name]
	delete(s.Experiments, p.Name)
	if had && len(old.Lists) > 0 {
		collectChunks(s)
	}
	return nil
}

func applyPutSourceStatus(s *State, p PutSourceStatus) error {
	s.Sources[p.Source] = p.Status
	return nil
}

func applyDeleteSourceStatus(s *State, p DeleteSourceStatus) error {
	delete(s.Sources, p.Source)
	return nil
}

func applyPutBranch(s *State, p PutBranch) error {
	if err := roomFor(s.Branches, p.Record.Branch, MaxBranches, "branches"); err != nil {
		return err
	}
	s.Branches[p.Record.Branch] = p.Record
	return nil
}

func applyDeleteBranch(s *State, p DeleteBranch) error {
	delete(s.Branches, p.Branch)
	return nil
}

func applyPutPull(s *State, p PutPull) error {
	if err := roomFor(s.Pulls, p.Record.Number, MaxPulls, "pull requests"); err != nil {
		return err
	}
	s.Pulls[p.Record.Number] = p.Record
	return nil
}

func applyDeletePull(s *State, p DeletePull) error {
	delete(s.Pulls, p.Number)
	return nil
}

func applyPutClaim(s *State, p PutClaim) error {
	if err := roomFor(s.Claims, p.Claim.CommentID, MaxClaims, "command claims"); err != nil {
		return err
	}
	s.Claims[p.Claim.CommentID] = p.Claim
	return nil
}

func applyDeleteClaim(s *State, p DeleteClaim) error {
	delete(s.Claims, p.CommentID)
	return nil
}

// roomFor refuses a new key in a full table; replacing a record is always
// allowed.
func roomFor[K comparable, V any](m map[K]V, k K, limit int, what string) error {
	if _, ok := m[k]; ok || len(m) < limit {
		return nil
	}
	return reject(ErrTableFull, "%d %s recorded, limit %d: delete some first", len(m), what, limit)
}
