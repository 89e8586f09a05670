package app

// The tests run the command several times in one process: controller names repeat.
func init() { skipControllerNameValidation = true }

// DelegatedAuth is the metrics endpoint's filter, for its own test.
var DelegatedAuth = delegatedAuth
