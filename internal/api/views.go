package api

import "github.com/policyrollout/reconciler/internal/api/apiv1"

// The API's JSON shapes are apiv1's view types, mapped from the
// replicated records there, so a record can change without the public
// JSON changing. These names keep the handlers' bodies as they were
// while internal/api is split into one handler type per family
// (issue 26); new code uses the apiv1 names.
type (
	statusResource          = apiv1.Status
	featureStatus           = apiv1.Feature
	policyStatus            = apiv1.PolicyStatus
	condition               = apiv1.Condition
	nodeResource            = apiv1.Node
	listNodesResponse       = apiv1.NodeList
	loadFailure             = apiv1.LoadFailure
	generationResource      = apiv1.Generation
	listGenerationsResponse = apiv1.GenerationList
	rollbackResource        = apiv1.Rollback
	policyResource          = apiv1.Policy
	listPoliciesResponse    = apiv1.PolicyList
	listRef                 = apiv1.ListRef
	experimentList          = apiv1.ExperimentList
)
