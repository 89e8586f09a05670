package app

// The tests run the command several times in one process: controller names repeat.
func init() { skipControllerNameValidation = true }
