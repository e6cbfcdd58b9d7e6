"""The MQTT adaptor room (issue 26, in progress): ``message.py`` maps an MQTT message to
the AMQP message the network carries and back. The client adaptor (MQTT connections on
the link lifecycle) comes next."""
