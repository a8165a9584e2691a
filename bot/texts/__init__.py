"""What models write about papers: one-paragraph summaries, and titles, abstracts and
summaries translated, for the subscribers who ask (`summaries`, `language`).

- prompts: what is asked, one text per request, and the key each text is stored under;
- answers: a model's answer checked (thinking, markup and links dropped; empty, too long
  or wrong-language answers refused) and a summary cut for the digest;
- client: the one client of an OpenAI-compatible endpoint (the official `openai` client),
  and `TextModel`, the model and its limits as the wiring makes them at start;
- writer: one run's texts, each once: read from the shelf (the store's texts), else asked
  of the model within the day's budget, the concurrency and the run's deadline.

Which digests want texts, and how the texts go into them, are the pipeline's
(`bot.pipeline.texts`); the texts stored are the store's (`store.texts`).
"""
