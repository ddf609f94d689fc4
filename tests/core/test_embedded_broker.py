"""The embedded (filesystem) broker: whole messages only, and a bad file never stops a consumer."""

from __future__ import annotations

import threading

from kombu import Connection

from thinkingbox_web.celery import app
from thinkingbox_web.env import filesystem_broker_options


def _connection(data_dir) -> Connection:
    """A connection to a broker folder of our own, made the way the Celery app makes its connections."""
    return Connection(
        app.conf.broker_url,
        transport=app.conf.broker_transport,
        transport_options=filesystem_broker_options(data_dir),
    )


def test_truncated_message_is_set_aside_and_the_next_one_delivered(tmp_path):
    queue_dir = tmp_path / "broker" / "queue"
    with _connection(tmp_path) as connection:
        queue = connection.SimpleQueue("jobs")
        (queue_dir / "0_truncated.jobs.msg").write_text('{"body": "eyJ0YXNrIjog')  # cut mid-write
        queue.put({"n": 1})

        message = queue.get(timeout=2)

        assert message.payload == {"n": 1}
        message.ack()
        queue.close()
    rejected = tmp_path / "broker" / "rejected"
    assert [p.name for p in rejected.iterdir()] == ["0_truncated.jobs.msg"]
    assert (rejected / "0_truncated.jobs.msg").read_text() == '{"body": "eyJ0YXNrIjog'


def test_a_consumer_never_sees_a_message_still_being_written(tmp_path):
    # Big messages written while a consumer polls the folder: kombu's own transport let the
    # consumer take a file between its creation and the end of its write.
    count, size = 60, 2_000_000
    with _connection(tmp_path) as producer_connection, _connection(tmp_path) as consumer_connection:
        producer = producer_connection.SimpleQueue("big")
        consumer = consumer_connection.SimpleQueue("big")

        def produce() -> None:
            for n in range(count):
                producer.put({"n": n, "blob": "x" * size})

        thread = threading.Thread(target=produce)
        thread.start()
        received = []
        while len(received) < count:
            message = consumer.get(timeout=30)
            received.append(message.payload["n"])
            message.ack()
        thread.join()
        producer.close()
        consumer.close()
    rejected = tmp_path / "broker" / "rejected"
    assert sorted(received) == list(range(count))
    assert (list(rejected.iterdir()) if rejected.exists() else []) == []
