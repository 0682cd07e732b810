"""The offline plan: run the program under mocks, summarise what it builds, check it against the policies."""
