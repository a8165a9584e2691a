"""What models write about papers: one-paragraph summaries, and titles, abstracts and
summaries translated, for the subscribers who ask (`summaries`, `language`).

- prompts: what is asked, one text per request, and the key each text is stored under;
- answers: a model's answer checked (thinking, markup and links dropped; empty, too long
  or wrong-language answers refused) and a summary cut for the digest;
- client: the one client of an OpenAI-compatible endpoint (the official `openai` client).

Which texts a run needs, the cache, the budget and the deadline are the pipeline's
(`bot.pipeline.texts`); the texts stored are the store's (`store.texts`).
"""
