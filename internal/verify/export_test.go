package verify

// Fault injection is test plumbing, not API: this package's external tests reach it here.

// The fault names.
const (
	FaultApprovalReusable         = faultApprovalReusable
	FaultReserveLies              = faultReserveLies
	FaultAmbiguousAsFailed        = faultAmbiguousAsFailed
	FaultAllowUnknown             = faultAllowUnknown
	FaultAnonymousPrincipal       = faultAnonymousPrincipal
	FaultChainBlind               = faultChainBlind
	FaultLeaseRetry               = faultLeaseRetry
	FaultExpiryOffByOne           = faultExpiryOffByOne
	FaultDelegationUnchecked      = faultDelegationUnchecked
	FaultRefuseAll                = faultRefuseAll
	FaultAnyoneEntitled           = faultAnyoneEntitled
	FaultSelfApprovalBytewise     = faultSelfApprovalBytewise
	FaultCountPerSession          = faultCountPerSession
	FaultTokenStale               = faultTokenStale
	FaultAttemptsUnbounded        = faultAttemptsUnbounded
	FaultLateOutcomeAnyAttempt    = faultLateOutcomeAnyAttempt
	FaultConflictUnnamed          = faultConflictUnnamed
	FaultArgumentsOptional        = faultArgumentsOptional
	FaultStateBlind               = faultStateBlind
	FaultCheckpointsBlind         = faultCheckpointsBlind
	FaultSchemaCurrentOnly        = faultSchemaCurrentOnly
	FaultSchemaV2Only             = "schema_v2_only" // FaultSchemaCurrentOnly's earlier name, still accepted
	FaultRevocationIgnored        = faultRevocationIgnored
	FaultCredentialCached         = faultCredentialCached
	FaultSkewThresholdUnit        = faultSkewThresholdUnit
	FaultPreconditionCached       = faultPreconditionCached
	FaultPolicyApprovalUnrequired = faultPolicyApprovalUnrequired
	FaultTransportNotExecuted     = faultTransportNotExecuted
	FaultTasksIgnored             = faultTasksIgnored
	FaultBudgetUnchecked          = faultBudgetUnchecked
	FaultScopeFailsOpen           = faultScopeFailsOpen
	FaultHopUnchecked             = faultHopUnchecked
	FaultHopFallback              = faultHopFallback
	FaultHopReceiptUnnamed        = faultHopReceiptUnnamed
	FaultPinIgnored               = faultPinIgnored
)

// Faults returns every fault name with the guarantees it makes fail.
func Faults() map[string][]string { return faultNames() }

// WithFaults returns c with the named faults injected.
func WithFaults(c *Config, names ...string) *Config {
	c.faults = names
	return c
}
