"""What tests/project/test_docs_snippets.py needs to run the documentation's blocks: the Markdown reader,
the block runner, and each page's setup (its input files, servers and expected outputs)."""
