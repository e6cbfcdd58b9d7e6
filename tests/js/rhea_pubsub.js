// Subscribe, then publish COUNT messages to TOPIC through the router, and report as JSON:
// what the subscriber received (in order) and how many of the publisher's deliveries were accepted.
// Usage: node rhea_pubsub.js PORT TOPIC COUNT [USERNAME PASSWORD]
const rhea = require('rhea');
const [port, topic, countText, username, password] = process.argv.slice(2);
const count = parseInt(countText, 10);
const received = [];
let accepted = 0;
let sent = 0;

const options = { host: '127.0.0.1', port: parseInt(port, 10), reconnect: false };
if (username) { options.username = username; options.password = password; }
const container = rhea.create_container({ id: 'rhea-interop' });
const connection = container.connect(options);
const timer = setTimeout(() => { finish(2); }, 20000);

function finish(code) {
  clearTimeout(timer);
  process.stdout.write(JSON.stringify({ received, accepted, sent }) + '\n');
  connection.close();
  setTimeout(() => process.exit(code), 50);
}

const receiver = connection.open_receiver({ source: topic, autoaccept: true, credit_window: 100 });
receiver.on('receiver_open', () => {
  // The subscription is effective once its attach completed: only now publish.
  const sender = connection.open_sender({ target: topic });
  sender.on('sendable', (context) => {
    while (context.sender.sendable() && sent < count) {
      context.sender.send({ body: 'rhea ' + sent });
      sent += 1;
    }
  });
  sender.on('accepted', () => {
    accepted += 1;
    if (accepted === count && received.length === count) finish(0);
  });
});
container.on('message', (context) => {
  received.push(context.message.body);
  if (accepted === count && received.length === count) finish(0);
});
container.on('error', (context) => { process.stderr.write(String(context.error) + '\n'); finish(1); });
container.on('connection_error', (context) => { process.stderr.write('connection error\n'); finish(1); });
