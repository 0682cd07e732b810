"""Entry point for `pulumi up`: everything lives in the `components` package."""

from components.program import main

main()
