"""How well traindoc answers, measured: `traindoc eval` and its cross-validation, and the fit of the shipped
answerability weights. Nothing at run time imports this package; it imports the runtime (agent, corpus) only."""
