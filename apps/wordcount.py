"""Word count: how many times each word has appeared on the topic ``lines``.

Input: ``lines``, one line of text per record (plain UTF-8; the key is ignored).

1. A DSL pipeline splits each line into words (lowercased, split on anything that is not a
   letter) and writes one record per word to ``words``, keyed by the word. Writing keyed
   records is what groups them: every occurrence of a word lands on the partition that
   Kafka's default partitioner picks for it, which is also that word's partition of the
   table below.
2. An agent over ``words`` counts them in the table ``word_counts`` (a dict backed by a
   local store and a compacted changelog, so counts survive restarts) and sends each new
   count to the topic ``word_counts`` (key: the word, value: the count as JSON).

The DSL only has windowed aggregations; an all-time count is an agent with a Table.

Run it::

    streamkit worker -A apps.wordcount --web-port 8080            # embedded broker
    streamkit worker -A apps.wordcount --broker 127.0.0.1:9092
    curl localhost:8080/tables/word_counts/hello                  # {"key": "hello", "value": 3}
"""

from __future__ import annotations

import re

import streamkit
from streamkit.streams.agent import AgentStream

_WORD = re.compile(r"[^\W\d_]+")  # runs of letters (Unicode aware): "don't" -> don, t


def words_of(line: str) -> list[str]:
    """The words of a line, lowercased."""
    return [w.lower() for w in _WORD.findall(line)]


app = streamkit.App("wordcount")
lines = app.topic("lines", value_type=str)
words = app.topic("words", value_type=str)
counts = app.topic("word_counts", value_type=int)
word_counts = app.Table("word_counts", default=int)

(app.stream(lines)
    .flat_map(words_of)
    .map_key(lambda _key, word: word)   # key each word by itself...
    .to(words))                         # ...so a word always reaches the same partition


@app.agent(words)
async def count(stream: AgentStream) -> None:
    async for word in stream:
        word_counts[word] += 1
        counts.send_soon(key=word, value=word_counts[word])
